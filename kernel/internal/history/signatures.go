package history

import (
	"encoding/base64"
	"sync"

	"github.com/annal-dev/annal/kernel/event"
)

// signingKeys are the signing keys a replay has met so far in the log, by
// key ID: the actors' keys from their creation and from actor.key events,
// each parsed once. parseAhead keeps them, reading each run's events in
// log order, so that the signatures of a run can be verified on all cores
// before the fold reaches it. A key that arrives another way is simply not
// here: the fold then verifies that signature itself.
type signingKeys map[string][]signingKey

type signingKey struct {
	vkey string
	key  *event.SigningKey
}

// learn adds the signing keys that ev carries.
func (ks signingKeys) learn(ev *event.Event) {
	if ev.Subject != nil && ev.Subject.SigningKey != "" {
		ks.add(ev.Subject.SigningKey)
	}
	if ev.KeyChange != nil && ev.KeyChange.Key != "" {
		ks.add(ev.KeyChange.Key)
	}
}

func (ks signingKeys) add(vkey string) {
	k, err := event.ParseSigningKey(vkey)
	if err != nil {
		return // the fold refuses the event that carries it
	}
	for _, have := range ks[k.ID] {
		if have.vkey == vkey {
			return
		}
	}
	ks[k.ID] = append(ks[k.ID], signingKey{vkey: vkey, key: k})
}

// verifySignatures verifies, on workers goroutines, the signature of each
// signed event of p over its statement in the log origin, under the keys
// of ks with the ID it names, and records in p.verifiedBy the key it
// verifies under. It reads ks, which no one changes meanwhile.
func (p *parsedRun) verifySignatures(ks signingKeys, origin string, workers int) {
	var signed []int
	for j, ev := range p.events {
		if ev != nil && ev.Signed != nil && len(ks[ev.Signed.Key]) > 0 {
			signed = append(signed, j)
		}
	}
	if len(signed) == 0 {
		return
	}
	p.origin, p.verifiedBy = origin, make([]string, len(p.events))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := w; n < len(signed); n += workers {
				j := signed[n]
				p.verifiedBy[j] = verifiedBy(p.events[j], ks, origin)
			}
		}()
	}
	wg.Wait()
}

// verifiedBy is the signing key of ks whose signature ev carries, over
// its statement in the log origin, or "".
func verifiedBy(ev *event.Event, ks signingKeys, origin string) string {
	s := ev.Signed
	req, err := event.RequestOf(ev)
	if err != nil {
		return ""
	}
	stmt, err := event.SignedStatement(origin, s.By, s.Nonce, s.Time, req)
	if err != nil {
		return ""
	}
	sig, err := base64.StdEncoding.DecodeString(s.Sig)
	if err != nil {
		return ""
	}
	for _, k := range ks[s.Key] {
		if k.key.Verify(stmt, sig) {
			return k.vkey
		}
	}
	return ""
}
