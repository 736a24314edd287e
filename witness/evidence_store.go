package witness

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Sources of evidence: the "source" of an EvidenceRecord and the label of
// the evidence counter.
const (
	// EvidenceFromGossip: a peer's checkpoint contradicted this witness's.
	EvidenceFromGossip = "gossip"
	// EvidenceFromAddCheckpoint: an add-checkpoint request carried a
	// checkpoint of the stored size with another root, signed by the log.
	EvidenceFromAddCheckpoint = "add-checkpoint"
)

// MaxEvidencePerLog bounds the evidence files kept for one log. One is
// enough to show that a log equivocated; the bound keeps a log that signs
// many histories from filling the witness's disk. Equivocations beyond it
// are still logged.
const MaxEvidencePerLog = 16

var (
	// ErrUnknownEvidence is returned for an evidence ID that is not stored.
	// errors.Is(ErrUnknownEvidence, fs.ErrNotExist) holds.
	ErrUnknownEvidence error = notExistError("unknown evidence")
	// ErrEvidenceLimit is returned when a log already has
	// MaxEvidencePerLog evidence files.
	ErrEvidenceLimit = errors.New("the log has as many evidence files as a witness keeps")
)

// EvidenceRecord describes a stored evidence file.
type EvidenceRecord struct {
	// ID is the lowercase hex SHA-256 that names the two trees of the
	// equivocation; the file is served at /evidence/<ID>.
	ID     string `json:"id"`
	Origin string `json:"origin"`
	// Sizes are the two checkpoints' sizes, smaller first.
	Sizes [2]uint64 `json:"sizes"`
	// Source is EvidenceFromGossip or EvidenceFromAddCheckpoint.
	Source  string    `json:"source"`
	FoundAt time.Time `json:"found_at"`
}

// storedEvidence is an evidence bucket value.
type storedEvidence struct {
	EvidenceRecord
	File []byte `json:"file"`
}

// putEvidence stores an evidence file under rec.ID, unless one of that ID
// is stored already (added is then false). It fails with ErrEvidenceLimit
// if the log has MaxEvidencePerLog files.
func (s *Store) putEvidence(rec EvidenceRecord, file []byte) (added bool, err error) {
	id, err := parseEvidenceID(rec.ID)
	if err != nil {
		return false, err
	}
	logID := LogID(rec.Origin)
	// Seen again is the usual case once a log is caught: it costs no write.
	err = s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(evidenceBucket).Bucket(logID[:]); b != nil && b.Get(id) != nil {
			return errSeen
		}
		return nil
	})
	if errors.Is(err, errSeen) {
		return false, nil
	}
	value, err := json.Marshal(storedEvidence{EvidenceRecord: rec, File: file})
	if err != nil {
		return false, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(evidenceBucket).CreateBucketIfNotExists(logID[:])
		if err != nil {
			return err
		}
		if b.Get(id) != nil {
			return nil
		}
		if n := b.Stats().KeyN; n >= MaxEvidencePerLog {
			return fmt.Errorf("%w: %q has %d", ErrEvidenceLimit, abbreviate(rec.Origin), n)
		}
		added = true
		return b.Put(id, value)
	})
	return added && err == nil, err
}

var errSeen = errors.New("evidence seen already")

// Evidence lists the stored evidence, oldest first.
func (s *Store) Evidence() ([]EvidenceRecord, error) {
	var out []EvidenceRecord
	err := s.forEachEvidence(func(id, v []byte) error {
		var e storedEvidence
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("evidence record %x: %w", id, err)
		}
		out = append(out, e.EvidenceRecord)
		return nil
	})
	slices.SortFunc(out, func(a, b EvidenceRecord) int {
		if c := a.FoundAt.Compare(b.FoundAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, err
}

// EvidenceFile returns the evidence file of an ID that Evidence lists, or
// an error wrapping ErrUnknownEvidence.
func (s *Store) EvidenceFile(id string) ([]byte, error) {
	raw, err := parseEvidenceID(id)
	if err != nil {
		return nil, err
	}
	var file []byte
	err = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(evidenceBucket).ForEachBucket(func(k []byte) error {
			v := tx.Bucket(evidenceBucket).Bucket(k).Get(raw)
			if v == nil || file != nil {
				return nil
			}
			var e storedEvidence
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("evidence record %s: %w", id, err)
			}
			file = e.File
			return nil
		})
	})
	if err == nil && file == nil {
		err = fmt.Errorf("%w: %s", ErrUnknownEvidence, id)
	}
	return file, err
}

// evidenceCount is the number of stored evidence files.
func (s *Store) evidenceCount() (int, error) {
	n := 0
	err := s.forEachEvidence(func(_, _ []byte) error { n++; return nil })
	return n, err
}

func (s *Store) forEachEvidence(fn func(id, v []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(evidenceBucket)
		return root.ForEachBucket(func(k []byte) error {
			return root.Bucket(k).ForEach(fn)
		})
	})
}

// parseEvidenceID decodes a lowercase hex evidence ID.
func parseEvidenceID(id string) ([]byte, error) {
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != 32 || hex.EncodeToString(raw) != id {
		return nil, fmt.Errorf("%w: %q is not an evidence ID (64 lowercase hex digits)", ErrUnknownEvidence, abbreviate(id))
	}
	return raw, nil
}
