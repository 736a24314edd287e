package kernel

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/annal-dev/annal/format/bundle"
	"github.com/annal-dev/annal/internal/atomicfile"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// The sealed store keeps sealed payloads beside the log
// (kernel/event/sealed.go), in the data folder:
//
//	sealed/keys/<subject>                 32 random bytes, 0600: the subject's key
//	sealed/payloads/<subject>/<hex>       nonce || AES-256-GCM(salt || payload)
//
// where <hex> is the commitment's hex and the commitment is the
// additional data, so a file cannot be passed off as another's. A payload
// is durable (file and folder synced) before the event that commits to it
// is decided, so a receipt never names a payload the kernel could lose; a
// payload whose event was refused or never written is an orphan that
// nothing names and costs only its bytes.
//
// Erasure destroys the key: its file is overwritten with zeros, synced and
// removed, and the subject's payloads are removed. Without the key the
// ciphertexts, and any copy of them (a backup of the data folder), are
// noise. What the file system keeps of the old key's blocks (a journal, an
// SSD's spare blocks, a snapshot) is outside the kernel's reach: on such
// storage put the data folder on an encrypted volume.
type sealedStore struct {
	dir string
	// mu orders key creation against destruction, so that a seal racing
	// an erasure cannot leave a fresh key behind it, and guards inflight,
	// writing and erased.
	mu sync.Mutex
	// inflight are the payload files written for requests not decided
	// yet, by path: a refused request removes the file it wrote, unless
	// another request stored the same commitment meanwhile (shared).
	inflight map[string]*sealUse
	// writing counts, by subject, the payload files being written outside
	// mu; a destruction waits (written) until none is, so that it neither
	// removes a folder a write is renaming into nor leaves a file behind.
	writing map[string]int
	written *sync.Cond
	// erased are the subjects destroyed since the store opened: nothing
	// more is sealed under them, even by a request that looked at the
	// ledger before their erasure.
	erased map[string]bool
}

type sealUse struct{ shared bool }

// ErrErased is the answer for a sealed payload whose subject was erased.
var ErrErased = errors.New("the payload's subject was erased: its key is destroyed")

func openSealedStore(dataDir string) *sealedStore {
	s := &sealedStore{dir: filepath.Join(dataDir, "sealed"), inflight: map[string]*sealUse{}, writing: map[string]int{}, erased: map[string]bool{}}
	s.written = sync.NewCond(&s.mu)
	return s
}

func (s *sealedStore) keyPath(subject string) string {
	return filepath.Join(s.dir, "keys", subject)
}

func (s *sealedStore) payloadPath(sp *event.SealedPayload) string {
	return filepath.Join(s.dir, "payloads", sp.Subject, strings.TrimPrefix(sp.Commitment, "sha256:"))
}

// key returns the subject's key, creating it when create is set.
func (s *sealedStore) key(subject string, create bool) ([]byte, error) {
	if !event.ValidSubject(subject) { // a subject is a file name: never a path
		return nil, fmt.Errorf("subject %q is not valid", subject)
	}
	path := s.keyPath(subject)
	k, err := os.ReadFile(path)
	switch {
	case err == nil && len(k) == 32:
		return k, nil
	case err == nil:
		return nil, fmt.Errorf("sealed key %s: %d bytes, not 32", path, len(k))
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	case !create:
		return nil, ErrErased
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	k = make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, bytes.NewReader(k), 0o600); err != nil {
		return nil, fmt.Errorf("write the key of subject %s: %w", subject, err)
	}
	return k, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// seal stores payload (canonical) under subject with salt, durably, and
// returns what the event carries, and whether this request wrote a new
// file (then it must call release once decided). The file is written
// outside mu: sealed actions sync their files in parallel.
func (s *sealedStore) seal(subject string, salt, payload []byte) (_ *event.SealedPayload, fresh bool, _ error) {
	sp := &event.SealedPayload{Subject: subject, Commitment: event.SealCommitment(salt, payload)}
	path := s.payloadPath(sp)
	s.mu.Lock()
	if s.erased[subject] {
		s.mu.Unlock()
		return nil, false, ErrErased
	}
	key, err := s.key(subject, true)
	write := true
	if err == nil {
		switch u := s.inflight[path]; {
		case u != nil:
			u.shared = true // written again below, so durable before this one's receipt
		case fileExists(path):
			write = false // the same payload under the same salt, stored already
		default:
			fresh = true
			s.inflight[path] = &sealUse{}
		}
	}
	if err == nil && write {
		s.writing[subject]++
	}
	s.mu.Unlock()
	if err != nil || !write {
		return sp, false, err
	}
	err = s.write(path, key, sp.Commitment, salt, payload)
	s.mu.Lock()
	if s.writing[subject]--; s.writing[subject] == 0 {
		delete(s.writing, subject)
		s.written.Broadcast()
	}
	s.mu.Unlock()
	if err != nil {
		s.release(sp, fresh, false)
		return nil, false, err
	}
	return sp, fresh, nil
}

func (s *sealedStore) write(path string, key []byte, commitment string, salt, payload []byte) error {
	aead, err := gcm(key)
	if err != nil {
		return err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	plain := append(append([]byte{}, salt...), payload...)
	sealed := aead.Seal(nonce, nonce, plain, []byte(commitment))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := atomicfile.Write(path, bytes.NewReader(sealed), 0o600); err != nil {
		return fmt.Errorf("store a sealed payload: %w", err)
	}
	return nil
}

// release ends a fresh seal's request: kept, its file stays; refused, its
// file goes unless another request stored the same commitment meanwhile.
func (s *sealedStore) release(sp *event.SealedPayload, fresh, keep bool) {
	if !fresh {
		return
	}
	path := s.payloadPath(sp)
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.inflight[path]
	delete(s.inflight, path)
	if !keep && u != nil && !u.shared {
		os.Remove(path)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// open returns the salt and payload a commitment was made to, ErrErased
// once the subject's key is gone, or an error naming what is wrong.
func (s *sealedStore) open(sp *event.SealedPayload) (salt, payload []byte, err error) {
	key, err := s.key(sp.Subject, false)
	if err != nil {
		return nil, nil, err
	}
	sealed, err := os.ReadFile(s.payloadPath(sp))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("sealed payload %s of subject %s is missing from the data folder", sp.Commitment, sp.Subject)
	} else if err != nil {
		return nil, nil, err
	}
	aead, err := gcm(key)
	if err != nil {
		return nil, nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, nil, fmt.Errorf("sealed payload %s is damaged", sp.Commitment)
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(sp.Commitment))
	if err != nil || len(plain) < event.SaltSize || !sp.Opens(plain[:event.SaltSize], plain[event.SaltSize:]) {
		return nil, nil, fmt.Errorf("sealed payload %s is damaged: it does not open its commitment", sp.Commitment)
	}
	return plain[:event.SaltSize], plain[event.SaltSize:], nil
}

// openPayload is ledger.Options.Open: the plaintext, or false.
func (s *sealedStore) openPayload(sp *event.SealedPayload) (json.RawMessage, bool) {
	_, payload, err := s.open(sp)
	return payload, err == nil
}

// destroy erases subject: its key is overwritten, synced and removed, then
// its payloads are removed. It is idempotent, so that the start after a
// crash between an erasure's event and its destruction finishes it.
func (s *sealedStore) destroy(subject string) error {
	if !event.ValidSubject(subject) {
		return fmt.Errorf("subject %q is not valid", subject)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.erased[subject] = true
	for s.writing[subject] > 0 {
		s.written.Wait()
	}
	path := s.keyPath(subject)
	if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
		_, werr := f.Write(make([]byte, 32))
		serr := f.Sync()
		f.Close()
		if err := errors.Join(werr, serr); err != nil {
			return fmt.Errorf("overwrite the key of subject %s: %w", subject, err)
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.RemoveAll(filepath.Join(s.dir, "payloads", subject))
}

// holds reports whether a key of subject is present.
func (s *sealedStore) holds(subject string) bool { return fileExists(s.keyPath(subject)) }

// newSalt returns a fresh salt for a payload the kernel seals itself.
func newSalt() ([]byte, error) {
	salt := make([]byte, event.SaltSize)
	_, err := rand.Read(salt)
	return salt, err
}

// sealAction seals the payload of an action that asks for it or must (its
// actor or envelope asks for sealed payloads) before it is decided: the
// payload is stored durably and the action carries its commitment instead.
// The plaintext stays with the kernel for the decision (the policy gate
// reads it through Options.Open). An execute payload, read by the rules,
// is never sealed; asking for it is an error, and so is a payload sent by
// hash (its blob is not erasable).
func (k *Kernel) sealAction(ctx context.Context, actor *Actor, req ActionRequest, action *event.Action) (done func(error), _ error) {
	asked := req.Seal || req.Subject != "" || req.Salt != ""
	if !asked {
		if !k.ledger.AnyMustSeal() {
			return noop, nil
		}
		k.mu.RLock()
		envelope := req.Envelope
		if envelope == "" && action.Type != event.Observe {
			if a, ok := k.ledger.Actors[actor.ID]; ok && !a.IsHuman() {
				envelope = pickEnvelope(k.ledger, actor.ID, action.Type, action.Target, event.At(k.cfg.Now()))
			}
		}
		must := k.ledger.MustSeal(actor.ID, envelope)
		k.mu.RUnlock()
		if !must || action.Type == event.Execute || (action.Payload == nil && action.PayloadHash == "") {
			return noop, nil
		}
		if s, _ := ctx.Value(signatureKey{}).(*RequestSignature); s != nil && s.By == actor.ID {
			// The kernel's own salt would not be what the actor signed.
			return nil, formError(StageValidate, "%s or its envelope asks that payloads be sealed: a signed request seals its payload itself (seal, subject and salt; the Go client and annal do)", actor.ID)
		}
	}
	switch {
	case action.Type == event.Execute:
		return nil, formError(StageValidate, "an execute payload is read by the rules (its cost, its intent) and cannot be sealed")
	case action.PayloadHash != "":
		return nil, formError(StageValidate, "a sealed payload travels inline, not by payload_hash: a blob is not erasable")
	case action.Payload == nil:
		return nil, formError(StageValidate, "seal: the action has no payload to seal")
	case len(action.Payload) > event.MaxSealedPayload:
		return nil, denyAt(StageValidate, GateForm, ErrTooLarge, "sealed payload is %d bytes, more than %d", len(action.Payload), event.MaxSealedPayload)
	}
	subject := req.Subject
	if subject == "" {
		subject = actor.ID
	}
	if !event.ValidSubject(subject) {
		return nil, formError(StageValidate, "subject %q is not 1-128 of [A-Za-z0-9._:-] starting with a letter or digit", subject)
	}
	k.mu.Lock()
	erased, isErased := k.ledger.Erased[subject]
	k.mu.Unlock()
	if isErased {
		return nil, denyAt(StageValidate, ledger.GateSeal, ErrConflict, "subject %s was erased at entry %d: nothing more is sealed under it", subject, erased.Index)
	}
	var salt []byte
	if req.Salt != "" {
		var err error
		if salt, err = base64.StdEncoding.DecodeString(req.Salt); err != nil || len(salt) != event.SaltSize {
			return nil, formError(StageValidate, "salt is not the standard base64 of %d bytes", event.SaltSize)
		}
	} else {
		var err error
		if salt, err = newSalt(); err != nil {
			return nil, err
		}
	}
	sp, fresh, err := k.sealed.seal(subject, salt, action.Payload)
	if errors.Is(err, ErrErased) {
		return nil, denyAt(StageValidate, ledger.GateSeal, ErrConflict, "subject %s was erased: nothing more is sealed under it", subject)
	} else if err != nil {
		return nil, denyAt(StageValidate, "", ErrUnavailable, "%v", err)
	}
	action.Payload, action.Sealed = nil, sp
	return func(err error) {
		// Refused for sure: nothing names the file. An append whose
		// outcome is unknown may have landed: the file stays.
		var d *Denial
		refused := errors.As(err, &d) && !d.OutcomeUnknown
		k.sealed.release(sp, fresh, !refused)
	}, nil
}

func noop(error) {}

// OpenSealed returns the salt and payload of a sealed payload the kernel
// still holds, or ErrErased.
func (k *Kernel) OpenSealed(sp *event.SealedPayload) (salt, payload []byte, err error) {
	return k.sealed.open(sp)
}

// EraseRequest asks the kernel to erase a data subject.
type EraseRequest struct {
	Reason string `json:"reason,omitempty"`
}

// EraseSubject erases subject's sealed payloads: a subject.erased event
// (a human's), and once it is durable the subject's key is destroyed and
// its payloads removed. From then on the payloads are unreadable through
// the API, in bundles and in the data folder, and nothing more is sealed
// under the subject; every entry, proof and checkpoint is unchanged.
func (k *Kernel) EraseSubject(ctx context.Context, by *Actor, subject string, req EraseRequest) (*Receipt, error) {
	const stage = "erase"
	if !event.ValidSubject(subject) {
		return nil, formError(stage, "subject %q is not 1-128 of [A-Za-z0-9._:-] starting with a letter or digit", subject)
	}
	d, err := k.decide(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindSubjectErased, Actor: by.ID, Erasure: &event.Erasure{Subject: subject, Reason: req.Reason}}, nil
	})
	if err != nil {
		return nil, err
	}
	if err := k.sealed.destroy(subject); err != nil {
		// The event is durable: the next start destroys the key
		// (finishErasures). Until then the payloads are still readable.
		k.logger.Error("erasure logged but the key was not destroyed; the next start destroys it", "subject", subject, "err", err)
		return nil, denyAt(stage, "", ErrUnavailable, "subject %s is erased in the log (entry %d) but its key could not be destroyed yet: %v", subject, d.index, err)
	}
	k.logger.Info("subject erased", "subject", subject, "by", by.ID, "index", d.index)
	return receiptOf(d, "", ""), nil
}

// finishErasures destroys the keys of erased subjects a crash left behind
// (between an erasure's event and its destruction), and a key a seal
// created while the erasure was in flight.
func (k *Kernel) finishErasures() error {
	for subject := range k.ledger.Erased {
		if !k.sealed.holds(subject) {
			continue
		}
		if err := k.sealed.destroy(subject); err != nil {
			return fmt.Errorf("destroy the key of erased subject %s: %w", subject, err)
		}
		k.logger.Warn("destroyed the key of a subject erased before a crash", "subject", subject)
	}
	return nil
}

// SealedOf returns the sealed payload an entry's action commits to, or nil.
func SealedOf(entry []byte) *event.SealedPayload {
	if !bytes.Contains(entry, []byte(`"sealed":{`)) {
		return nil
	}
	var e struct {
		Action *struct {
			Sealed *event.SealedPayload `json:"sealed"`
		} `json:"action"`
	}
	if json.Unmarshal(entry, &e) != nil || e.Action == nil {
		return nil
	}
	return e.Action.Sealed
}

// openingOf is what a bundle carries for entry: its sealed payload opened
// while the kernel holds it, else nothing (the entry's commitment stands
// alone).
func (k *Kernel) openingOf(entry []byte, res *ExportResult) *bundle.Opening {
	sp := SealedOf(entry)
	if sp == nil {
		return nil
	}
	salt, payload, err := k.sealed.open(sp)
	if err != nil {
		if !errors.Is(err, ErrErased) {
			k.logger.Warn("export: a sealed payload cannot be opened", "commitment", sp.Commitment, "err", err)
		}
		res.Erased++
		return nil
	}
	res.Opened++
	return &bundle.Opening{Payload: payload, Salt: salt}
}

// Erased reports whether subject was erased.
func (k *Kernel) Erased(subject string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.ledger.Erased[subject]
	return ok
}
