package sealstore

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// sealOne seals a payload of its own under subject and reports what it got.
func sealOne(t *testing.T, s *Store, subject string, n int) (opened bool, err error) {
	t.Helper()
	salt, err := NewSalt()
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(fmt.Sprintf(`{"n":%d}`, n))
	sp, fresh, err := s.Seal(subject, salt, payload)
	if err != nil {
		return false, err
	}
	s.Release(sp, fresh, true)
	_, got, err := s.Open(sp)
	return err == nil && string(got) == string(payload), err
}

// Many seals of one new subject at once make one key: every payload opens
// under the key the subject keeps. So do seals of many new subjects.
func TestSealsOfNewSubjectsAtOnce(t *testing.T) {
	s := Open(t.TempDir())
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			subject := "one"
			if i%2 == 1 {
				subject = fmt.Sprintf("delta:%d", i)
			}
			if opened, err := sealOne(t, s, subject, i); !opened {
				t.Errorf("seal %d under %s does not open: %v", i, subject, err)
			}
		})
	}
	wg.Wait()
	if len(s.writing) != 0 {
		t.Fatalf("left behind: writing %v", s.writing)
	}
}

// A subject's key being made does not hold up seals of other subjects:
// with one new subject's key write stalled, another subject seals.
func TestNewKeyDoesNotHoldOtherSubjectsUp(t *testing.T) {
	gate := make(chan struct{})
	b := &stalledKeys{diskBackend: newDiskBackend(t.TempDir()), stalled: "slow", gate: gate, entered: make(chan struct{})}
	s := newStore(b)
	slow := make(chan error, 1)
	go func() {
		_, err := sealOne(t, s, "slow", 1)
		slow <- err
	}()
	<-b.entered // the slow subject's key is being written
	done := make(chan error, 1)
	go func() {
		_, err := sealOne(t, s, "fast", 2)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a seal of another subject waited for a new subject's key")
	}
	close(gate)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

// stalledKeys stalls the writing of one subject's key until gate closes.
type stalledKeys struct {
	diskBackend
	stalled string
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (b *stalledKeys) createKey(subject string, key []byte) ([]byte, error) {
	if subject == b.stalled {
		b.once.Do(func() { close(b.entered) })
		<-b.gate
	}
	return b.diskBackend.createKey(subject, key)
}

// Seals racing an erasure of their subject: once the erasure returns, the
// subject has no key, and every seal either was refused as erased or
// wrote a payload the erasure then removed with the key.
func TestSealsRacingAnErasure(t *testing.T) {
	for round := range 20 {
		s := Open(t.TempDir())
		subject := fmt.Sprintf("customer-%d", round)
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				// Sealed only: an Open racing the erasure may find the key
				// before its destruction and the payload after its removal.
				salt, err := NewSalt()
				if err != nil {
					t.Error(err)
					return
				}
				sp, fresh, err := s.Seal(subject, salt, []byte(fmt.Sprintf(`{"n":%d}`, i)))
				if err != nil && !errors.Is(err, ErrErased) {
					t.Errorf("seal %d: %v", i, err)
				} else if err == nil {
					s.Release(sp, fresh, true)
				}
			})
		}
		if err := s.Destroy(subject); err != nil {
			t.Fatal(err)
		}
		if s.Holds(subject) {
			t.Fatalf("round %d: the subject keeps a key right after its erasure", round)
		}
		wg.Wait()
		if s.Holds(subject) {
			t.Fatalf("round %d: a seal racing the erasure left a key behind it", round)
		}
		if _, err := sealOne(t, s, subject, 99); !errors.Is(err, ErrErased) {
			t.Fatalf("round %d: a seal after the erasure: %v", round, err)
		}
	}
}
