package history

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	bolt "go.etcd.io/bbolt"
)

var (
	bucketMeta = []byte("meta")
	// BucketLedger holds the ledger's objects, each under its key with a
	// CRC-32C of the key and value.
	BucketLedger = []byte("ledger")
	// bucketHistory is the history index (index.go, postings.go): a key
	// per indexed term and block of the log, whose value lists the term's
	// events in the block.
	bucketHistory = []byte("history")
	// bucketEvents is the history index of format events/3: a key per
	// indexed term of every folded event, no values. An open moves it
	// into bucketHistory (migrateIndex).
	bucketEvents = []byte("events")
	keyOrigin    = []byte("origin")
	// keyFormat names how values are stored; a state file without it (or
	// with another) is from an older release, and is folded again, but for
	// eventsFormat, whose index an open moves into this format's.
	keyFormat    = []byte("format")
	storeFormat  = []byte("crc32c+history/4")
	eventsFormat = []byte("crc32c+events/3")
	// keyFolded records, with every write, how many log entries the
	// stored ledger has folded, the leaf hash of the last one, and how
	// many keys the ledger bucket holds: the start-up check compares the
	// first two with the log, the count finds keys a damaged page hides.
	keyFolded = []byte("folded")
)

// castagnoli is CRC-32C, which every stored value carries: bbolt checks
// its meta pages but not the pages that hold keys and values, so a byte
// flipped on disk would otherwise be read as state.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Store keeps a copy of the ledger in bbolt, so that a restart folds only
// the log's tail. It is a cache of the log: it may lag behind it (a crash
// loses what was not yet written), never run ahead of it, and `annald
// rebuild` can always recompute it from the log alone. A state file that
// is damaged (truncated, a byte flipped, not a bbolt file at all) is found
// when it is opened, set aside as state.db.damaged, and replaced by an
// empty one, which the kernel fills by folding the log.
type Store struct {
	DB *bolt.DB
}

// FoldedRecord is the value of keyFolded.
type FoldedRecord struct {
	Size uint64
	Leaf [32]byte
	Keys uint64
}

func (r FoldedRecord) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, r.Size)
	b = append(b, r.Leaf[:]...)
	return binary.BigEndian.AppendUint64(b, r.Keys)
}

// decodeFoldedRecord reads what encode wrote; false if raw is not the
// 48 bytes of a fold record.
func decodeFoldedRecord(raw []byte) (FoldedRecord, bool) {
	var r FoldedRecord
	if len(raw) != 48 {
		return r, false
	}
	r.Size = binary.BigEndian.Uint64(raw)
	copy(r.Leaf[:], raw[8:40])
	r.Keys = binary.BigEndian.Uint64(raw[40:])
	return r, true
}

// StateCache is an opened state file and the ledger it held.
type StateCache struct {
	Store  *Store
	Ledger *ledger.Ledger
	Folded FoldedRecord
	// Damaged says why the file was set aside, if it was; reset, that it
	// was written by an older release and emptied.
	Damaged error
	Reset   bool
}

// OpenStateCache opens the state file at path for the log origin and
// loads its ledger. A damaged file never makes it fail or crash: it is
// set aside and an empty state is opened in its place (damaged says why).
// A file from an older release loads as an empty ledger too. Only what
// the data folder's owner must look at is an error: the file belongs to
// another log, or cannot be replaced.
func OpenStateCache(path, origin string) (*StateCache, error) {
	c, err := LoadStateFile(path, origin)
	var damage *logstore.DamageError
	if !errors.As(err, &damage) {
		return c, err
	}
	if err := os.Rename(path, path+".damaged"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("set the damaged state file aside: %w", err)
	}
	c, err = LoadStateFile(path, origin)
	if err != nil {
		return nil, err
	}
	c.Damaged = damage
	return c, nil
}

// LoadStateFile opens and reads the state file. Everything that reads its
// pages runs on one goroutine that turns a memory fault into a panic and
// the panic into a *DamageError: bbolt maps the file and trusts its pages.
func LoadStateFile(path, origin string) (*StateCache, error) {
	damaged := func(format string, args ...any) error {
		return &logstore.DamageError{File: path, Problem: fmt.Sprintf(format, args...), Remedy: "it is a cache of the log: annald sets it aside and folds the log again", Repairable: true}
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 && fi.Size() < 4096 {
		return nil, damaged("%d bytes is too short for a state file", fi.Size())
	}
	type result struct {
		c   *StateCache
		err error
	}
	done := make(chan result, 1)
	go func() {
		var db *bolt.DB
		defer func() {
			if p := recover(); p != nil {
				if db != nil {
					closeQuietly(db)
				}
				done <- result{err: damaged("reading it failed: %v", p)}
			}
		}()
		debug.SetPanicOnFault(true)
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		if errors.Is(err, bolt.ErrTimeout) {
			done <- result{err: fmt.Errorf("open state %s: %w", path, err)}
			return
		} else if err != nil {
			done <- result{err: damaged("not a readable bbolt file: %v", err)}
			return
		}
		c, err := readState(db, path, origin, damaged)
		if err != nil {
			if c != nil {
				db = c.Store.DB // the file opened again after a move of its index
			}
			closeQuietly(db)
			done <- result{err: err}
			return
		}
		done <- result{c: c}
	}()
	r := <-done
	return r.c, r.err
}

// closeQuietly closes a damaged database without waiting: a panic inside
// bbolt may have left one of its locks held, and then Close never returns
// (the file has been set aside; at worst its handle stays open).
func closeQuietly(db *bolt.DB) { go db.Close() }

// stateFound is what reading a state file found, besides damage.
type stateFound int

const (
	stateLoaded     stateFound = iota // a ledger, loaded
	stateNew                          // an empty file: no buckets yet
	stateOlder                        // a file an older release wrote
	stateIndexOlder                   // a file whose history index is of eventsFormat
)

func readState(db *bolt.DB, path, origin string, damaged func(string, ...any) error) (*StateCache, error) {
	c := &StateCache{Store: &Store{DB: db}}
	r := stateReader{path: path, origin: origin, damaged: damaged}
	var found stateFound
	// Read in a read-only transaction: a start whose state is sound
	// writes (and syncs) nothing.
	read := func(tx *bolt.Tx) error {
		var err error
		found, err = r.read(tx, c)
		return err
	}
	err := db.View(read)
	if err == nil && found == stateIndexOlder {
		if db, err = migrateIndex(db, path); db != nil {
			c.Store.DB = db
		}
		if err != nil {
			return c, fmt.Errorf("moving the history index of %s into format %s: %w", path, storeFormat, err)
		}
		err = db.View(read)
	}
	if err != nil || found == stateLoaded {
		return c, err
	}
	c.Reset, c.Ledger = found == stateOlder, ledger.New()
	return c, db.Update(func(tx *bolt.Tx) error { return emptyState(tx, origin) })
}

// stateReader reads the state file at path, of the log origin; damaged
// makes the error that sets it aside.
type stateReader struct {
	path, origin string
	damaged      func(format string, args ...any) error
}

// read checks the state file's shape and loads its fold record and ledger
// into c.
func (r stateReader) read(tx *bolt.Tx, c *StateCache) (stateFound, error) {
	if fi, err := os.Stat(r.path); err != nil {
		return 0, err
	} else if fi.Size() < tx.Size() {
		return 0, r.damaged("%d bytes, but its pages reach %d: it was truncated", fi.Size(), tx.Size())
	}
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if tx.Bucket(BucketLedger) != nil {
			return 0, r.damaged("it has a ledger but no meta bucket")
		}
		return stateNew, nil
	}
	switch have := meta.Get(keyOrigin); {
	case have == nil:
		return 0, r.damaged("its meta bucket names no log")
	case string(have) != r.origin:
		return 0, fmt.Errorf("state file %s belongs to log %q, not %q", r.path, have, r.origin)
	}
	switch format := meta.Get(keyFormat); {
	case bytes.Equal(format, eventsFormat):
		if tx.Bucket(BucketLedger) == nil || tx.Bucket(bucketEvents) == nil {
			return 0, r.damaged("it has no ledger or history bucket")
		}
		return stateIndexOlder, nil
	case !bytes.Equal(format, storeFormat):
		return stateOlder, nil // fold the log again
	}
	b := tx.Bucket(BucketLedger)
	if b == nil || tx.Bucket(bucketHistory) == nil {
		return 0, r.damaged("it has no ledger or history bucket")
	}
	var err error
	if c.Folded, err = r.foldRecord(meta); err != nil {
		return 0, err
	}
	c.Ledger, err = r.ledger(b, c.Folded)
	return stateLoaded, err
}

// foldRecord reads the fold record (none: nothing folded yet).
func (r stateReader) foldRecord(meta *bolt.Bucket) (FoldedRecord, error) {
	raw := meta.Get(keyFolded)
	if raw == nil {
		return FoldedRecord{}, nil
	}
	f, ok := decodeFoldedRecord(raw)
	if !ok {
		return f, r.damaged("its fold record is %d bytes", len(raw))
	}
	return f, nil
}

// ledger loads the ledger bucket b: every value must match its checksum,
// and the keys and the ledger's size the fold record.
func (r stateReader) ledger(b *bolt.Bucket, folded FoldedRecord) (*ledger.Ledger, error) {
	stored := map[string][]byte{}
	if err := b.ForEach(func(k, v []byte) error {
		if len(v) < 4 || binary.BigEndian.Uint32(v) != checksum(k, v[4:]) {
			return r.damaged("the value of %q does not match its checksum", k)
		}
		stored[string(k)] = append([]byte(nil), v[4:]...)
		return nil
	}); err != nil {
		return nil, err
	}
	if uint64(len(stored)) != folded.Keys {
		return nil, r.damaged("it holds %d keys, its fold record says %d", len(stored), folded.Keys)
	}
	led, err := ledger.Load(stored)
	if err != nil {
		return nil, r.damaged("its ledger does not load: %v", err)
	}
	if led.Size != folded.Size {
		return nil, r.damaged("its ledger has folded %d entries, its fold record says %d", led.Size, folded.Size)
	}
	return led, nil
}

// emptyState makes a new or older state file an empty one of the log
// origin, in this release's format.
func emptyState(tx *bolt.Tx, origin string) error {
	for _, name := range [][]byte{BucketLedger, bucketEvents, bucketHistory} {
		if tx.Bucket(name) != nil {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
	}
	if _, err := tx.CreateBucket(bucketHistory); err != nil {
		return err
	}
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	if _, err := tx.CreateBucket(BucketLedger); err != nil {
		return err
	}
	if err := meta.Delete(keyFolded); err != nil {
		return err
	}
	if err := meta.Put(keyOrigin, []byte(origin)); err != nil {
		return err
	}
	return meta.Put(keyFormat, storeFormat)
}

// OpenCheckedState opens the data folder's state cache and checks it
// against the log (whose newest files checkLog has checked): the entry it
// says it folded last must be the log's. A state from another history of
// this origin, or a damaged one, is set aside and the log folded again.
//
// leafAt returns the log's leaf hash at an index, or ok false when the log
// has no such entry or it cannot be read (then the fold finds out).
func OpenCheckedState(dir *logstore.DataDir, logger *slog.Logger, leafAt func(index uint64) (leaf []byte, ok bool)) (*StateCache, error) {
	cache, err := OpenStateCache(dir.StatePath(), dir.Origin)
	if err != nil {
		return nil, err
	}
	if f := cache.Folded; f.Size > 0 {
		last := f.Size - 1
		if leaf, ok := leafAt(last); ok && !bytes.Equal(leaf, f.Leaf[:]) {
			cache.Store.Close()
			damage := &logstore.DamageError{File: dir.StatePath(), Problem: fmt.Sprintf("it has folded entry %d with leaf hash %x, but the log's entry %d is %x: it is the state of another history", last, f.Leaf, last, leaf),
				Remedy: "it is a cache of the log: annald sets it aside and folds the log again", Repairable: true}
			if err := os.Rename(dir.StatePath(), dir.StatePath()+".damaged"); err != nil {
				return nil, err
			}
			if cache, err = OpenStateCache(dir.StatePath(), dir.Origin); err != nil {
				return nil, err
			}
			cache.Damaged = damage
		}
	}
	switch {
	case cache.Damaged != nil:
		logger.Error("the state cache is damaged; it was set aside and the log is folded again", "err", cache.Damaged)
	case cache.Reset:
		logger.Info("the state file was written by an older release; folding the log again")
	}
	return cache, nil
}

func checksum(key, value []byte) uint32 {
	h := crc32.New(castagnoli)
	h.Write(key)
	h.Write([]byte{0})
	h.Write(value)
	return h.Sum32()
}

func (s *Store) Close() error { return s.DB.Close() }

// ReleaseMappedPages drops this process's references to the pages of the
// state file it has read through bbolt's memory map. Why: bbolt reads
// every page through one shared, read-only map of the whole file, and a
// page once read stays in the process's resident set until bbolt makes the
// map anew as the file grows. With the history index taking new pages all
// over the file, the resident set climbed with the log though the kernel
// held no more memory (a 10-minute soak at 5,000 actions/s: the map's part
// 1 → 11 MiB of 39–51 MiB, back to 1 at each new map). The pages stay in
// the page cache, and the next read of one maps it again (a minor fault).
// It runs in a read transaction, during which bbolt cannot replace the map.
func (s *Store) ReleaseMappedPages() error {
	return s.DB.View(func(tx *bolt.Tx) error {
		info := s.DB.Info()
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, info.Data, uintptr(tx.Size()), syscall.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("release the state file's mapped pages: %w", errno)
		}
		return nil
	})
}

// indexChunk bounds the history keys one transaction writes: bbolt
// handles many moderate transactions far better than one huge one (a
// whole log's index, after a rebuild).
const indexChunk = 100_000

// Write stores history index terms, encoded ledger keys and the fold
// record, in one transaction. An index of more than indexChunk entries
// goes first, in transactions of its own: it may run ahead of the fold
// record (after a crash, folding the log again puts the same entries once
// more, and a block's value is a union), never behind it. (annald rebuild
// writes a new file instead: rebuildfile.go.)
func (s *Store) Write(values map[string][]byte, index []IndexedEvent, folded FoldedRecord) error {
	return s.write(values, postingsOf(index), folded)
}

// write is Write with the history index grouped by term.
func (s *Store) write(values map[string][]byte, index *postings, folded FoldedRecord) error {
	if index.indices > indexChunk {
		if err := s.writeIndex(index); err != nil {
			return err
		}
		index = newPostings()
	}
	return s.DB.Update(func(tx *bolt.Tx) error {
		if err := indexIn(tx, index); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		b := ledgerBucket{Bucket: tx.Bucket(BucketLedger)}
		if raw := meta.Get(keyFolded); raw != nil {
			b.keys = binary.BigEndian.Uint64(raw[40:])
		}
		for k, v := range values {
			if err := b.set([]byte(k), v); err != nil {
				return err
			}
		}
		folded.Keys = b.keys
		return meta.Put(keyFolded, folded.encode())
	})
}

// ledgerBucket writes the ledger's values, each behind its checksum, and
// counts the keys it holds for the fold record.
type ledgerBucket struct {
	*bolt.Bucket
	keys uint64
}

// set stores v under k, or deletes k when v is nil.
func (b *ledgerBucket) set(k, v []byte) error {
	had := b.Get(k) != nil
	if v == nil {
		if !had {
			return nil
		}
		b.keys--
		return b.Delete(k)
	}
	if !had {
		b.keys++
	}
	stored := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(v)), checksum(k, v))
	return b.Put(k, append(stored, v...))
}

// FoldedAt is the fold record of a ledger that has folded size entries:
// the leaf hash of the last one, read back from the log (it is durable,
// so it is read outside the kernel's lock).
func FoldedAt(ctx context.Context, tl *logstore.Log, size uint64) (FoldedRecord, error) {
	r := FoldedRecord{Size: size}
	if size == 0 {
		return r, nil
	}
	entry, err := tl.ReadEntry(ctx, size-1)
	if err != nil {
		return r, fmt.Errorf("read the last folded entry: %w", err)
	}
	r.Leaf = event.LeafHash(entry)
	return r, nil
}
