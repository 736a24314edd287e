package witness

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The Store's side of the checkpoint journal (journal.go): the checkpoints
// recorded since the journal was last copied into bbolt are kept in memory
// too (recent), and every read of a latest checkpoint looks there first.

// recentCheckpoint is a checkpoint recorded in the journal and not yet in
// bbolt: decoded, and as stored.
type recentCheckpoint struct {
	cp     *CosignedCheckpoint
	record []byte
}

// groupTx is what a commit group's changes see: bbolt's state (a read-only
// transaction), the journal's recent checkpoints, and the changes of the
// group before them. putLatest records a change; the group's changes are
// made durable together when the group ends.
type groupTx struct {
	tx      *bolt.Tx
	s       *Store
	written map[[sha256.Size]byte]recentCheckpoint
	records [][]byte
}

// latestHead is the latest checkpoint of origin without its note (only
// size and root are read from bbolt), or nil if there is none.
func (g *groupTx) latestHead(origin string) (*CosignedCheckpoint, error) {
	if r, ok := g.recent(origin); ok {
		return r.cp, nil
	}
	return latestHeadInTx(g.tx, origin)
}

// latest is the latest checkpoint of origin, note included, or nil.
func (g *groupTx) latest(origin string) (*CosignedCheckpoint, error) {
	if r, ok := g.recent(origin); ok {
		return r.cp, nil
	}
	return latestInTx(g.tx, origin)
}

func (g *groupTx) recent(origin string) (recentCheckpoint, bool) {
	id := LogID(origin)
	if r, ok := g.written[id]; ok {
		return r, true
	}
	return g.s.recentCheckpoint(id)
}

// putLatest records cp as its origin's latest checkpoint, once the group
// is durable.
func (g *groupTx) putLatest(cp *CosignedCheckpoint) error {
	record, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if g.written == nil {
		g.written = map[[sha256.Size]byte]recentCheckpoint{}
	}
	g.written[LogID(cp.Origin)] = recentCheckpoint{cp: cp, record: record}
	g.records = append(g.records, record)
	return nil
}

// commitGroup runs apply, a group's changes, and makes what they recorded
// durable with one journal write and one fdatasync, before it returns nil.
// If apply fails, nothing is recorded. After a failed journal write the
// Store refuses every later group (the file's state is then unknown: a
// failed fdatasync may have dropped the pages it did not write) until it
// is opened again, which reads what did reach the journal.
func (s *Store) commitGroup(apply func(g *groupTx) error) error {
	return s.commitOverlapped(apply, nil)
}

// commitOverlapped is commitGroup, running meanwhile, if the group
// recorded anything, once its journal write is under way and before it
// is waited for (journal.startAppend). Where the write cannot be left
// under way, meanwhile runs after it. The journal is not written by
// anything else until the write is durable, so meanwhile holds up the
// next group: it is for a request alone.
func (s *Store) commitOverlapped(apply func(g *groupTx) error, meanwhile func()) error {
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	if s.journalErr != nil {
		return s.journalErr
	}
	if s.journal.used() > 0 && s.journal.free() < s.journal.size/4 {
		if err := s.flushJournalLocked(nil); err != nil {
			s.journalErr = fmt.Errorf("copy the checkpoint journal into the state: %w", err)
			return s.journalErr
		}
	}
	g := &groupTx{s: s}
	err := s.db.View(func(tx *bolt.Tx) error {
		g.tx = tx
		return apply(g)
	})
	if err != nil || len(g.records) == 0 {
		return err
	}
	err = s.writeJournal(g.records, meanwhile)
	s.overlapsWrites.Store(s.journal.canOverlap())
	if err != nil {
		s.journalErr = fmt.Errorf("write the checkpoint journal: %w", err)
		return s.journalErr
	}
	s.recentMu.Lock()
	if s.recent == nil {
		s.recent = map[[sha256.Size]byte]recentCheckpoint{}
	}
	for id, r := range g.written {
		s.recent[id] = r
	}
	s.recentMu.Unlock()
	return nil
}

// writeJournal appends records to the journal, durably, running meanwhile
// (if not nil) while the write is under way.
func (s *Store) writeJournal(records [][]byte, meanwhile func()) error {
	if meanwhile == nil {
		return s.journal.append(records)
	}
	if err := s.journal.startAppend(records); err != nil {
		return err
	}
	meanwhile()
	return s.journal.finishAppend()
}

// recentCheckpoint is the latest checkpoint of the log id recorded in the
// journal since it was last copied into bbolt, if any.
func (s *Store) recentCheckpoint(id [sha256.Size]byte) (recentCheckpoint, bool) {
	s.recentMu.RLock()
	defer s.recentMu.RUnlock()
	r, ok := s.recent[id]
	return r, ok
}

// flushJournalLocked copies the recent checkpoints into bbolt, with also
// (if not nil) in the same transaction, commits it (synced), then empties
// the journal. A crash between the two reads the journal again at open:
// its records are the ones just copied, and copying them again changes
// nothing. Called with ckMu held.
func (s *Store) flushJournalLocked(also func(tx *bolt.Tx) error) error {
	s.recentMu.RLock()
	recent := make(map[[sha256.Size]byte][]byte, len(s.recent))
	for id, r := range s.recent {
		recent[id] = r.record
	}
	s.recentMu.RUnlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(checkpointsBucket)
		for id, record := range recent {
			if err := b.Put(id[:], record); err != nil {
				return err
			}
		}
		if also != nil {
			return also(tx)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.recentMu.Lock()
	s.recent = nil
	s.recentMu.Unlock()
	if s.journal.used() == 0 {
		return nil
	}
	return s.journal.reset(s.journal.epoch + 1)
}

// openCheckpointJournal opens the journal beside the state file and copies
// what it holds into bbolt.
func (s *Store) openCheckpointJournal() error {
	j, records, err := openJournal(s.path+journalSuffix, defaultJournalSize)
	if err != nil {
		return err
	}
	s.journal = j
	s.overlapsWrites.Store(j.canOverlap())
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	s.recentMu.Lock()
	for i, record := range records {
		cp, err := decodeCosigned(record)
		if err != nil || cp == nil {
			s.recentMu.Unlock()
			return fmt.Errorf("checkpoint journal record %d: %w", i, errors.Join(err, errors.New("undecodable")))
		}
		if s.recent == nil {
			s.recent = map[[sha256.Size]byte]recentCheckpoint{}
		}
		s.recent[LogID(cp.Origin)] = recentCheckpoint{cp: cp, record: record}
	}
	s.recentMu.Unlock()
	return s.flushJournalLocked(nil)
}
