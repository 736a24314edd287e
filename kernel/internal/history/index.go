package history

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/api/layout"
	bolt "go.etcd.io/bbolt"
)

// The history: every folded event is indexed by the terms people search
// it by, in the state file beside the ledger (written in the same
// transaction, so the index covers exactly what the ledger folded). A page
// reads O(page) index keys and entries, not O(log).
//
// Visibility: the log itself is public (its tiles and /v1/events/<i> need
// no credential), so the history hides nothing that is secret; it answers
// within the caller's oversight so that a console shows each person their
// own agents. Root sees every event; any other actor sees the events whose
// actor is itself or an actor it created. A filter that names an actor, an
// envelope or a session outside the caller's oversight is refused
// (ErrForbidden), never answered with an empty page (historyScope).

// Index dimensions: the first byte of an index key. Only selective terms
// are indexed (each costs disk per event): who acted, under which
// envelope, in which session, and the rare outcomes. Kind, type, target,
// time and the common outcome (committed) filter what an index or a
// plain scan of the log yields.
const (
	termActor    byte = 'a'
	termEnvelope byte = 'e'
	termSession  byte = 's'
	termOutcome  byte = 'o'
)

// Outcomes an action can have in the history.
const (
	OutcomeCommitted = "committed"
	OutcomeDenied    = "denied"
	OutcomeHeld      = "held"
)

// IndexedEvent is a folded event's index terms, waiting to be persisted.
type IndexedEvent struct {
	Index uint64
	Terms [][]byte // dimension byte + value
}

// IndexTerms are the index terms of ev.
func IndexTerms(ev *event.Event) [][]byte {
	terms := [][]byte{term(termActor, ev.Actor)}
	if ev.Session != "" {
		terms = append(terms, term(termSession, ev.Session))
	}
	if a := ev.Action; a != nil && a.Envelope != "" {
		terms = append(terms, term(termEnvelope, a.Envelope))
	} else if ev.Envelope != nil && ev.Envelope.ID != "" {
		terms = append(terms, term(termEnvelope, ev.Envelope.ID))
	}
	if o := outcomeOf(ev); o == OutcomeDenied || o == OutcomeHeld {
		terms = append(terms, term(termOutcome, o))
	}
	return terms
}

func term(dim byte, value string) []byte { return append([]byte{dim}, value...) }

// outcomeOf is what became of the action an event records, if it records
// one.
func outcomeOf(ev *event.Event) string {
	switch ev.Kind {
	case event.KindAction:
		return OutcomeCommitted
	case event.KindActionDenied:
		return OutcomeDenied
	case event.KindHoldRequested:
		return OutcomeHeld
	}
	return ""
}

// indexKey is term || 0x00 || big-endian index: one term's keys sort by
// index. Terms never hold 0x00 (ids, kinds and types are validated).
func indexKey(t []byte, index uint64) []byte {
	k := append(append(make([]byte, 0, len(t)+9), t...), 0)
	return binary.BigEndian.AppendUint64(k, index)
}

// indexKeys are the sorted index keys of index: bbolt inserts sorted keys
// page by page.
func indexKeys(index []IndexedEvent) [][]byte {
	n := 0
	for _, ie := range index {
		n += len(ie.Terms)
	}
	keys := make([][]byte, 0, n)
	for _, ie := range index {
		for _, t := range ie.Terms {
			keys = append(keys, indexKey(t, ie.Index))
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	return keys
}

// Query selects events. Empty fields select everything.
type Query struct {
	Actor, Envelope, Session, Kind, Type, Outcome string
	// TargetPrefix selects actions whose target starts with it.
	TargetPrefix string
	// Since and Until bound the event's time (inclusive).
	Since, Until event.Instant
	// Oldest pages from the oldest event on; by default newest first.
	Oldest bool
	// Cursor continues a page: the index to start from (inclusive), as
	// NextCursor gave it.
	Cursor *uint64
	// Limit is the page size (0: 50; at most MaxHistoryPage).
	Limit int
}

// MaxPage bounds a page; maxHistoryScan bounds the index keys one
// page reads before it returns what it found with a cursor to go on.
// maxHistoryBytes bounds the entry bytes of a page, so that a page of
// large events still fits a client's answer limit (1 MiB).
const (
	MaxPage         = 500
	maxHistoryScan  = 20_000
	maxHistoryBytes = 640 << 10
)

// Item is one event of a page.
type Item struct {
	Index    uint64
	LeafHash string
	// Entry is the event exactly as logged; Event, decoded.
	Entry []byte
	Event *event.Event
}

// Page is a page of events and where the next one starts (nil at
// the end).
type Page struct {
	Events     []Item
	NextCursor *uint64
}

// targetNeedle is what the entry of an action whose target starts with
// q.TargetPrefix holds, byte for byte: canonical JSON writes the member
// "target" as "target":"<target>", with printable ASCII other than the
// quote and the backslash as it is. So an entry without it is passed over
// unparsed; one with it is parsed and judged by matches, like any other.
// nil when there is no prefix or it holds a byte JSON might escape.
func (q Query) targetNeedle() []byte {
	if q.TargetPrefix == "" {
		return nil
	}
	for i := 0; i < len(q.TargetPrefix); i++ {
		if c := q.TargetPrefix[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return nil
		}
	}
	return []byte(`"target":"` + q.TargetPrefix)
}

// Matches checks every filter against the event itself: an index only
// proposes candidates, so a damaged index can hide an event but never
// show one the query did not ask for.
func (q Query) Matches(ev *event.Event, visible map[string]bool) bool {
	a := ev.Action
	envelope := ""
	if a != nil {
		envelope = a.Envelope
	}
	if ev.Envelope != nil && envelope == "" {
		envelope = ev.Envelope.ID
	}
	switch {
	case visible != nil && !visible[ev.Actor],
		q.Actor != "" && ev.Actor != q.Actor,
		q.Envelope != "" && envelope != q.Envelope,
		q.Session != "" && ev.Session != q.Session,
		q.Kind != "" && string(ev.Kind) != q.Kind,
		q.Type != "" && (a == nil || string(a.Type) != q.Type),
		q.Outcome != "" && outcomeOf(ev) != q.Outcome,
		q.TargetPrefix != "" && (a == nil || !strings.HasPrefix(a.Target, q.TargetPrefix)),
		!q.Since.IsZero() && ev.Time.Before(q.Since),
		!q.Until.IsZero() && q.Until.Before(ev.Time):
		return false
	}
	return true
}

// candidates yields the indexes of events that the sources' index keys
// name (every index when there are none), from start on, in order: the
// persisted index, then the tail folded since it was written.
func candidates(b *bolt.Bucket, tail []IndexedEvent, sources [][]byte, start, size uint64, oldest bool) func() (uint64, bool) {
	if len(sources) == 0 {
		i, done := start, size == 0
		return func() (uint64, bool) {
			if done || i >= size {
				return 0, false
			}
			v := i
			if oldest {
				i++
			} else if i == 0 {
				done = true
			} else {
				i--
			}
			return v, true
		}
	}
	var streams []func() (uint64, bool)
	for _, src := range sources {
		streams = append(streams, termStream(b, tail, src, start, oldest))
	}
	heads := make([]*uint64, len(streams))
	for j, s := range streams {
		if v, ok := s(); ok {
			heads[j] = &v
		}
	}
	return func() (uint64, bool) {
		best := -1
		for j, h := range heads {
			if h != nil && (best < 0 || (oldest && *h < *heads[best]) || (!oldest && *h > *heads[best])) {
				best = j
			}
		}
		if best < 0 {
			return 0, false
		}
		v := *heads[best]
		if n, ok := streams[best](); ok {
			heads[best] = &n
		} else {
			heads[best] = nil
		}
		return v, true
	}
}

// termStream yields the indexes of one term from start on: newest first
// the unpersisted tail then the persisted keys, oldest first the other way.
//
// The tail holds every folded event from its first index on, and persist
// may already have written some of them to the index: the persisted keys
// are read only below the tail, so none is yielded twice.
func termStream(b *bolt.Bucket, tail []IndexedEvent, t []byte, start uint64, oldest bool) func() (uint64, bool) {
	below := uint64(math.MaxUint64)
	if len(tail) > 0 {
		below = tail[0].Index
	}
	var fromTail []uint64
	for _, ie := range tail {
		if slices.ContainsFunc(ie.Terms, func(x []byte) bool { return bytes.Equal(x, t) }) {
			if (oldest && ie.Index >= start) || (!oldest && ie.Index <= start) {
				fromTail = append(fromTail, ie.Index)
			}
		}
	}
	if !oldest {
		slices.Reverse(fromTail)
	}
	prefix := append(slices.Clone(t), 0)
	c := b.Cursor()
	var k []byte
	first := true
	persisted := func() (uint64, bool) {
		if first {
			first = false
			k, _ = c.Seek(indexKey(t, start))
			if !oldest {
				if k == nil || !bytes.Equal(k, indexKey(t, start)) {
					if k == nil {
						k, _ = c.Last()
					} else {
						k, _ = c.Prev()
					}
				}
			}
		} else if oldest {
			k, _ = c.Next()
		} else {
			k, _ = c.Prev()
		}
		if k == nil || !bytes.HasPrefix(k, prefix) || len(k) != len(prefix)+8 {
			return 0, false
		}
		i := binary.BigEndian.Uint64(k[len(prefix):])
		for !oldest && i >= below { // newest first: skip what the tail yields
			if k, _ = c.Prev(); k == nil || !bytes.HasPrefix(k, prefix) || len(k) != len(prefix)+8 {
				return 0, false
			}
			i = binary.BigEndian.Uint64(k[len(prefix):])
		}
		if oldest && i >= below { // oldest first: the tail takes over
			return 0, false
		}
		return i, true
	}
	persistedDone := false
	return func() (uint64, bool) {
		if !oldest && len(fromTail) > 0 {
			v := fromTail[0]
			fromTail = fromTail[1:]
			return v, true
		}
		if !persistedDone {
			if v, ok := persisted(); ok {
				return v, true
			}
			persistedDone = true
		}
		if oldest && len(fromTail) > 0 {
			v := fromTail[0]
			fromTail = fromTail[1:]
			return v, true
		}
		return 0, false
	}
}

// entryAt reads entry i of a log of size, through a per-query cache of
// bundles.
func entryAt(ctx context.Context, tl *logstore.Log, bundles map[uint64]*api.EntryBundle, i, size uint64) ([]byte, error) {
	bi := i / layout.EntryBundleWidth
	b, ok := bundles[bi]
	if !ok {
		var err error
		if b, err = tl.ReadBundle(ctx, bi, size); err != nil {
			return nil, err
		}
		bundles[bi] = b
	}
	if int(i%layout.EntryBundleWidth) >= len(b.Entries) {
		return nil, errors.New("entry beyond its bundle")
	}
	return b.Entries[i%layout.EntryBundleWidth], nil
}

// Find answers q from the index of st and the entries of tl, in a
// log of size: visible are the actors whose events q may show (nil: all),
// and tail gives the folded events not yet in the index, read once the
// index's transaction has begun (an event persisted meanwhile is in both
// and shown once, never in neither: persist drops the tail only after its
// write committed).
func Find(ctx context.Context, st *Store, tl *logstore.Log, q Query, visible map[string]bool, size uint64, tail func() []IndexedEvent) (*Page, error) {
	// The source of candidates: the most selective indexed filter, else
	// the viewer's actors, else every index.
	var sources [][]byte
	switch {
	case q.Envelope != "":
		sources = [][]byte{term(termEnvelope, q.Envelope)}
	case q.Session != "":
		sources = [][]byte{term(termSession, q.Session)}
	case q.Actor != "":
		sources = [][]byte{term(termActor, q.Actor)}
	case visible != nil:
		for id := range visible {
			sources = append(sources, term(termActor, id))
		}
	case q.Outcome == OutcomeDenied || q.Outcome == OutcomeHeld:
		sources = [][]byte{term(termOutcome, q.Outcome)}
	}
	start := uint64(0)
	if !q.Oldest && size > 0 {
		start = size - 1
	}
	if q.Cursor != nil {
		start = *q.Cursor
	}
	if size == 0 || (!q.Oldest && start >= size) {
		start = max(size, 1) - 1
	}
	page := &Page{Events: []Item{}}
	bundles := map[uint64]*api.EntryBundle{}
	targetNeedle := q.targetNeedle()
	scanned, bytesOut := 0, 0
	err := st.DB.View(func(tx *bolt.Tx) error {
		next := candidates(tx.Bucket(bucketEvents), tail(), sources, start, size, q.Oldest)
		var last *uint64
		for {
			i, ok := next()
			if !ok {
				return nil
			}
			if last != nil && *last == i {
				continue
			}
			last = &i
			if scanned++; scanned > maxHistoryScan || len(page.Events) == q.Limit || bytesOut > maxHistoryBytes {
				page.NextCursor = &i
				return nil
			}
			entry, err := entryAt(ctx, tl, bundles, i, size)
			if err != nil {
				return err
			}
			if targetNeedle != nil && !bytes.Contains(entry, targetNeedle) {
				continue // cannot match: not worth parsing
			}
			ev, err := event.Parse(entry)
			if err != nil {
				return fmt.Errorf("log entry %d: %w", i, err)
			}
			if !q.Matches(ev, visible) {
				continue
			}
			bytesOut += len(entry)
			leaf := event.LeafHash(entry)
			page.Events = append(page.Events, Item{Index: i, LeafHash: hex.EncodeToString(leaf[:]), Entry: entry, Event: ev})
		}
	})
	return page, err
}
