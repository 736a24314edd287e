package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"
)

// StateFileName is the bbolt file in a data folder.
const StateFileName = "witness.db"

// MaxKeysPerLog bounds the verifier keys trusted for one origin: enough for
// a key rotation overlap and a post-quantum key beside a classical one.
const MaxKeysPerLog = 8

// DefaultLockTimeout is how long OpenStore waits for another process to
// release the state file before giving up with ErrDataDirInUse.
const DefaultLockTimeout = time.Second

// The bbolt layout. The logs and checkpoints buckets are keyed by
// SHA-256(origin), the same identifier the monitoring endpoint uses, so
// keys have a fixed length whatever the origin.
var (
	// logsBucket: SHA-256(origin) → JSON LogConfig.
	logsBucket = []byte("logs")
	// checkpointsBucket: SHA-256(origin) → JSON CosignedCheckpoint, the
	// latest checkpoint cosigned for that origin.
	checkpointsBucket = []byte("checkpoints")
	// metaBucket: "schema" → the layout version.
	metaBucket = []byte("meta")
	// peersBucket: peer name → JSON PeerConfig.
	peersBucket = []byte("peers")
	// evidenceBucket: SHA-256(origin) → a bucket of that log's evidence,
	// evidence ID (32 bytes) → JSON storedEvidence.
	evidenceBucket = []byte("evidence")
)

// schemaVersion is the layout version. The peers and evidence buckets were
// added without changing it: a witness that does not know them leaves them
// alone.
const schemaVersion = "1"

var (
	// ErrDataDirInUse is returned by OpenStore when another process (or
	// another Store in this one) holds the state file.
	ErrDataDirInUse = errors.New("witness state file is locked by another process")
	// ErrUnknownLog is returned for an origin that is not configured.
	// errors.Is(ErrUnknownLog, fs.ErrNotExist) holds. The HTTP answer to
	// add-checkpoint is 404.
	ErrUnknownLog error = notExistError("unknown log origin")
	// ErrLogExists is returned by AddLog for an origin already configured.
	ErrLogExists = errors.New("log origin is already configured")
	// ErrInvalidLogConfig wraps every validation error of a LogConfig.
	ErrInvalidLogConfig = errors.New("invalid log configuration")
)

// notExistError is a sentinel that is also fs.ErrNotExist.
type notExistError string

func (e notExistError) Error() string        { return string(e) }
func (e notExistError) Is(target error) bool { return target == fs.ErrNotExist }

// LogConfig is what a witness knows about one log it serves.
type LogConfig struct {
	// Origin is the checkpoint origin line that identifies the log.
	Origin string `json:"origin"`
	// Keys are the log's note verifier keys. A checkpoint is accepted if a
	// signature by any of them verifies and none by them fails. The key name
	// need not equal the origin (sum.golang.org signs "go.sum database tree").
	// Ed25519 (0x01), ECDSA (0x02), RFC 6962 STH (0x05) and ML-DSA-44 (0x06)
	// keys are supported, through github.com/transparency-dev/formats/note.
	Keys []string `json:"keys"`
	// TileURL is the log's c2sp.org/tlog-tiles prefix, used by gossip to
	// build consistency proofs. Optional.
	TileURL string `json:"tile_url,omitempty"`
}

// Validate checks a LogConfig: a non-empty origin of printable UTF-8 within
// MaxLineLength, 1 to MaxKeysPerLog keys that parse and are distinct, and
// an absolute http(s) tile URL if one is given.
func (c LogConfig) Validate() error {
	if c.Origin == "" {
		return fmt.Errorf("%w: origin is empty", ErrInvalidLogConfig)
	}
	if len(c.Origin) > MaxLineLength {
		return fmt.Errorf("%w: origin is %d bytes, more than %d", ErrInvalidLogConfig, len(c.Origin), MaxLineLength)
	}
	if err := checkNoteCharacters([]byte(c.Origin)); err != nil || strings.Contains(c.Origin, "\n") {
		return fmt.Errorf("%w: origin %q is not one line of UTF-8 text without control characters", ErrInvalidLogConfig, abbreviate(c.Origin))
	}
	if _, err := c.verifiers(); err != nil {
		return err
	}
	if c.TileURL != "" {
		u, err := url.Parse(c.TileURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: tile URL %q is not an absolute http(s) URL", ErrInvalidLogConfig, abbreviate(c.TileURL))
		}
	}
	return nil
}

// verifiers parses the log's keys.
func (c LogConfig) verifiers() (note.Verifiers, error) {
	vs, err := c.verifierList()
	if err != nil {
		return nil, err
	}
	return note.VerifierList(vs...), nil
}

// verifierList is the log's verifier keys, checked.
func (c LogConfig) verifierList() ([]note.Verifier, error) {
	switch {
	case len(c.Keys) == 0:
		return nil, fmt.Errorf("%w: log %q has no verifier key", ErrInvalidLogConfig, abbreviate(c.Origin))
	case len(c.Keys) > MaxKeysPerLog:
		return nil, fmt.Errorf("%w: log %q has %d keys, more than %d", ErrInvalidLogConfig, abbreviate(c.Origin), len(c.Keys), MaxKeysPerLog)
	}
	type nameHash struct {
		name string
		hash uint32
	}
	seen := map[nameHash]bool{}
	vs := make([]note.Verifier, 0, len(c.Keys))
	for _, k := range c.Keys {
		k = strings.TrimSpace(k)
		v, err := fnote.NewVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("%w: log %q: verifier key %q: %v", ErrInvalidLogConfig, abbreviate(c.Origin), abbreviate(k), err)
		}
		id := nameHash{v.Name(), v.KeyHash()}
		if seen[id] {
			return nil, fmt.Errorf("%w: log %q: two keys share name %q and key ID %08x", ErrInvalidLogConfig, abbreviate(c.Origin), v.Name(), v.KeyHash())
		}
		seen[id] = true
		vs = append(vs, withFastEd25519(k, v))
	}
	return vs, nil
}

// CosignedCheckpoint is the latest checkpoint a witness cosigned for one
// origin.
type CosignedCheckpoint struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	// Root is the checkpoint's 32-byte root hash.
	Root []byte `json:"root"`
	// Note is the checkpoint text, the log signatures that verified, and
	// this witness's cosignature: what the monitoring endpoint serves.
	Note       []byte    `json:"note"`
	CosignedAt time.Time `json:"cosigned_at"`
}

// LogStatus is a configured log and what the witness cosigned for it.
type LogStatus struct {
	LogConfig
	// Latest is nil if the witness never cosigned a checkpoint of the log.
	Latest *CosignedCheckpoint `json:"latest,omitempty"`
}

// LogID is the identifier of an origin in the state and in the monitoring
// URL: SHA-256 of the origin line.
func LogID(origin string) [sha256.Size]byte { return sha256.Sum256([]byte(origin)) }

// Store is the witness's durable state: the configured logs and the latest
// cosigned checkpoint of each, the peers, and the equivocation evidence
// found. It holds an exclusive lock on its file.
type Store struct {
	db   *bolt.DB
	path string

	// The checkpoint journal (journal.go, journal_store.go). ckMu is held
	// by a commit group from its first read to its journal's sync, and by
	// whatever copies the journal into bbolt or removes a log.
	ckMu       sync.Mutex
	journal    *journal
	journalErr error
	// overlapsWrites says whether the journal's writes can be left under
	// way (journal.canOverlap), for commitOverlapped's callers.
	overlapsWrites atomic.Bool
	// recent holds the checkpoints in the journal and not yet in bbolt.
	recentMu sync.RWMutex
	recent   map[[sha256.Size]byte]recentCheckpoint

	// logs caches logAndRecord's answers by origin: every add-checkpoint
	// reads its log's configuration, and it changes only through AddLog
	// and RemoveLog, which empty the cache once committed. A request that
	// read it just before such a change is judged by the change all the
	// same: its transaction compares the stored record with the one it
	// read. Why: a read transaction and a JSON decode a request were 3%
	// of a cosignature's CPU.
	logsMu sync.RWMutex
	logs   map[string]cachedLog
	// logsGen counts the changes: a configuration read before one is not
	// cached after it.
	logsGen uint64
}

// cachedLog is a log's configuration and the record it was decoded from.
type cachedLog struct {
	cfg    LogConfig
	record []byte
}

// maxCachedLogs bounds Store.logs; past it the cache starts over.
const maxCachedLogs = 10_000

// OpenStore opens (creating on first use) the bbolt state file at path.
// bbolt takes an exclusive flock on the file; if another Store holds it,
// in this process or another, OpenStore gives up after lockTimeout with an
// error wrapping ErrDataDirInUse. Every bbolt commit is fsynced.
func OpenStore(path string, lockTimeout time.Duration) (*Store, error) {
	if lockTimeout <= 0 {
		lockTimeout = DefaultLockTimeout
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s stayed locked for %v", ErrDataDirInUse, path, lockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("open witness state %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{logsBucket, checkpointsBucket, metaBucket, peersBucket, evidenceBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(metaBucket)
		switch v := meta.Get([]byte("schema")); {
		case v == nil:
			return meta.Put([]byte("schema"), []byte(schemaVersion))
		case string(v) != schemaVersion:
			return fmt.Errorf("state schema version %q, this witness reads %q", v, schemaVersion)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open witness state %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	if err := s.openCheckpointJournal(); err != nil {
		if s.journal != nil {
			s.journal.close()
		}
		db.Close()
		return nil, fmt.Errorf("open witness state %s: %w", path, err)
	}
	return s, nil
}

// Close copies the checkpoint journal into bbolt, and releases the state
// file and its lock. A Close that cannot copy it leaves it to the next
// open.
func (s *Store) Close() error {
	s.ckMu.Lock()
	var err error
	if s.journalErr == nil {
		err = s.flushJournalLocked(nil)
	}
	s.ckMu.Unlock()
	return errors.Join(err, s.journal.close(), s.db.Close())
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// AddLog configures a new log. It fails with ErrLogExists if the origin is
// configured already. A cosigned checkpoint kept from an earlier
// configuration of the same origin (RemoveLog without forgetState) stays
// the log's state: the witness resumes from it.
func (s *Store) AddLog(cfg LogConfig) error {
	for i, k := range cfg.Keys {
		cfg.Keys[i] = strings.TrimSpace(k)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	value, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	id := LogID(cfg.Origin)
	defer s.forgetLogs()
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(logsBucket)
		if b.Get(id[:]) != nil {
			return fmt.Errorf("%w: %q", ErrLogExists, cfg.Origin)
		}
		return b.Put(id[:], value)
	})
}

// forgetLogs empties the cache of log configurations, after a change.
func (s *Store) forgetLogs() {
	s.logsMu.Lock()
	s.logs = nil
	s.logsGen++
	s.logsMu.Unlock()
}

// RemoveLog stops serving origin. Its latest cosigned checkpoint is kept
// unless forgetState is set: a witness that forgot it could later cosign a
// checkpoint inconsistent with one it cosigned before, if the log is added
// again.
func (s *Store) RemoveLog(origin string, forgetState bool) error {
	id := LogID(origin)
	defer s.forgetLogs()
	// No commit group runs meanwhile, and the journal is copied into bbolt
	// and emptied first, so that it holds no checkpoint of the log that a
	// restart would bring back.
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	if s.journalErr != nil {
		return s.journalErr
	}
	if err := s.flushJournalLocked(nil); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(logsBucket)
		if b.Get(id[:]) == nil {
			return fmt.Errorf("%w: %q", ErrUnknownLog, origin)
		}
		if err := b.Delete(id[:]); err != nil {
			return err
		}
		if forgetState {
			return tx.Bucket(checkpointsBucket).Delete(id[:])
		}
		return nil
	})
}

// Log returns the configuration of origin, or ErrUnknownLog.
func (s *Store) Log(origin string) (LogConfig, error) {
	cfg, _, err := s.logAndRecord(origin)
	return cfg, err
}

// logAndRecord is Log and the stored record it was decoded from, which a
// transaction compares with what it finds to tell that the log's
// configuration has not changed since, without decoding it again. The
// record is shared: the caller does not change it.
func (s *Store) logAndRecord(origin string) (LogConfig, []byte, error) {
	s.logsMu.RLock()
	c, ok := s.logs[origin]
	gen := s.logsGen
	s.logsMu.RUnlock()
	if ok {
		c.cfg.Keys = slices.Clone(c.cfg.Keys)
		return c.cfg, c.record, nil
	}
	var cfg LogConfig
	var record []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		cfg, err = logInTx(tx, origin)
		if err == nil {
			id := LogID(origin)
			record = bytes.Clone(tx.Bucket(logsBucket).Get(id[:]))
		}
		return err
	})
	if err != nil {
		return cfg, record, err
	}
	s.logsMu.Lock()
	if s.logsGen == gen {
		if s.logs == nil || len(s.logs) >= maxCachedLogs {
			s.logs = map[string]cachedLog{}
		}
		kept := cfg
		kept.Keys = slices.Clone(cfg.Keys)
		s.logs[origin] = cachedLog{cfg: kept, record: record}
	}
	s.logsMu.Unlock()
	return cfg, record, nil
}

// Logs lists the configured logs, ordered by origin, with their state.
func (s *Store) Logs() ([]LogStatus, error) {
	var out []LogStatus
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(logsBucket).ForEach(func(id, v []byte) error {
			var st LogStatus
			if err := json.Unmarshal(v, &st.LogConfig); err != nil {
				return fmt.Errorf("log record %x: %w", id, err)
			}
			latest, err := decodeCosigned(tx.Bucket(checkpointsBucket).Get(id))
			if r, ok := s.recentCheckpoint([sha256.Size]byte(id)); ok {
				latest, err = r.cp, nil
			}
			if err != nil {
				return fmt.Errorf("checkpoint record %x: %w", id, err)
			}
			st.Latest = latest
			out = append(out, st)
			return nil
		})
	})
	slices.SortFunc(out, func(a, b LogStatus) int { return strings.Compare(a.Origin, b.Origin) })
	return out, err
}

// Latest returns the latest cosigned checkpoint of the origin whose LogID is
// id, or an error wrapping fs.ErrNotExist if there is none.
func (s *Store) Latest(id [sha256.Size]byte) (*CosignedCheckpoint, error) {
	if r, ok := s.recentCheckpoint(id); ok {
		return r.cp, nil
	}
	var cp *CosignedCheckpoint
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		cp, err = decodeCosigned(tx.Bucket(checkpointsBucket).Get(id[:]))
		return err
	})
	if err == nil && cp == nil {
		err = fmt.Errorf("no cosigned checkpoint for log ID %x: %w", id, fs.ErrNotExist)
	}
	return cp, err
}

func logInTx(tx *bolt.Tx, origin string) (LogConfig, error) {
	id := LogID(origin)
	v := tx.Bucket(logsBucket).Get(id[:])
	if v == nil {
		return LogConfig{}, fmt.Errorf("%w: %q", ErrUnknownLog, abbreviate(origin))
	}
	var cfg LogConfig
	if err := json.Unmarshal(v, &cfg); err != nil {
		return LogConfig{}, fmt.Errorf("log record of %q: %w", abbreviate(origin), err)
	}
	return cfg, nil
}

func latestInTx(tx *bolt.Tx, origin string) (*CosignedCheckpoint, error) {
	id := LogID(origin)
	return decodeCosigned(tx.Bucket(checkpointsBucket).Get(id[:]))
}

// latestHeadInTx is latestInTx without the note: its size and root are all
// an add-checkpoint checks, and the note (two cosignature lines, the
// ML-DSA-44 one 3 KiB) is the costly part to decode.
func latestHeadInTx(tx *bolt.Tx, origin string) (*CosignedCheckpoint, error) {
	id := LogID(origin)
	v := tx.Bucket(checkpointsBucket).Get(id[:])
	if v == nil {
		return nil, nil
	}
	var head struct {
		Origin string `json:"origin"`
		Size   uint64 `json:"size"`
		Root   []byte `json:"root"`
	}
	if !decodeHead(v, &head.Origin, &head.Size, &head.Root) {
		if err := json.Unmarshal(v, &head); err != nil {
			return nil, err
		}
	}
	if len(head.Root) != sha256.Size {
		return nil, fmt.Errorf("stored root of %q is %d bytes, want %d", abbreviate(head.Origin), len(head.Root), sha256.Size)
	}
	return &CosignedCheckpoint{Origin: head.Origin, Size: head.Size, Root: head.Root}, nil
}

// decodeHead reads origin, size and root from the members of a stored
// checkpoint record that come first (putLatestInTx writes them first),
// without reading on through the note: a whole record is some 5 KiB with
// an ML-DSA-44 cosignature, and scanning all of it was half of what the
// commit loop, which every request waits on, did for a request (5% of the
// witness's processor). It answers false, and the caller decodes the whole
// record, for a record that does not start with those three members.
func decodeHead(v []byte, origin *string, size *uint64, root *[]byte) bool {
	dec := json.NewDecoder(bytes.NewReader(v))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for _, want := range []string{"origin", "size", "root"} {
		tok, err := dec.Token()
		if name, ok := tok.(string); err != nil || !ok || name != want {
			return false
		}
		switch want {
		case "origin":
			err = dec.Decode(origin)
		case "size":
			err = dec.Decode(size)
		case "root":
			err = dec.Decode(root)
		}
		if err != nil {
			return false
		}
	}
	return true
}

// decodeCosigned decodes a checkpoint record; nil for no record.
func decodeCosigned(v []byte) (*CosignedCheckpoint, error) {
	if v == nil {
		return nil, nil
	}
	var cp CosignedCheckpoint
	if err := json.Unmarshal(v, &cp); err != nil {
		return nil, err
	}
	if len(cp.Root) != sha256.Size {
		return nil, fmt.Errorf("stored root of %q is %d bytes, want %d", abbreviate(cp.Origin), len(cp.Root), sha256.Size)
	}
	return &cp, nil
}
