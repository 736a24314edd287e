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

	"github.com/annal-dev/annal/format/vfspath"
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
// envelope, in which session, in which trace, and the rare outcomes. Kind, type, target,
// time and the common outcome (committed) filter what an index or a
// plain scan of the log yields.
const (
	termActor    byte = 'a'
	termEnvelope byte = 'e'
	termSession  byte = 's'
	termOutcome  byte = 'o'
	// termTree: the events an agent's file tree is folded from (treeOf).
	termTree byte = 'v'
	// termPolicy: the definitions of a policy (policy.set), by name.
	termPolicy byte = 'p'
	// termTrace: the W3C trace id an event records (event.Event.TraceID),
	// so that an agent finds the events of its own trace.
	termTrace byte = 't'
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

// IndexTerms are the index terms of ev. They share one buffer: the kernel
// indexes every event it folds, under its lock, and a term each was most
// of what that cost.
func IndexTerms(ev *event.Event) [][]byte {
	var values [maxTerms]struct {
		dim   byte
		value string
	}
	n, size := 0, 0
	add := func(dim byte, value string) {
		values[n].dim, values[n].value = dim, value
		n++
		size += 1 + len(value)
	}
	add(termActor, ev.Actor)
	if ev.Session != "" {
		add(termSession, ev.Session)
	}
	if ev.TraceID != "" {
		add(termTrace, ev.TraceID)
	}
	if e := envelopeOf(ev); e != "" {
		add(termEnvelope, e)
	}
	if o := outcomeOf(ev); o == OutcomeDenied || o == OutcomeHeld {
		add(termOutcome, o)
	}
	if t := treeOf(ev); t != "" {
		add(termTree, t)
	}
	if ev.Policy != nil {
		add(termPolicy, ev.Policy.Policy.Name)
	}
	buf := make([]byte, 0, size)
	terms := make([][]byte, n)
	for i, v := range values[:n] {
		start := len(buf)
		buf = append(append(buf, v.dim), v.value...)
		terms[i] = buf[start:len(buf):len(buf)]
	}
	return terms
}

// maxTerms is the most index terms an event has: one of each dimension.
const maxTerms = 7

// treeOf is the agent whose file tree (seed 002, Virtual File System) ev
// takes part in: an action on a file of its tree, a signal to it (a
// resume empties its mem/working), a policy attached to or detached from
// it (its policy/history.json). "" for any other event.
func treeOf(ev *event.Event) string {
	switch {
	case ev.Action != nil:
		if p, ok, err := vfspath.ParseTarget(ev.Action.Target); ok && err == nil {
			return p.Agent
		}
	case ev.Signal != nil:
		return ev.Signal.Agent
	case ev.PolicyAttachment != nil:
		return ev.PolicyAttachment.Agent
	}
	return ""
}

func term(dim byte, value string) []byte { return append([]byte{dim}, value...) }

// envelopeOf is the envelope an event is under: its action's, else the
// envelope it records.
func envelopeOf(ev *event.Event) string {
	if a := ev.Action; a != nil && a.Envelope != "" {
		return a.Envelope
	}
	if ev.Envelope != nil {
		return ev.Envelope.ID
	}
	return ""
}

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

// Query selects events. Empty fields select everything.
type Query struct {
	Actor, Envelope, Session, Kind, Type, Outcome string
	// TraceID selects the events that record this W3C trace id.
	TraceID string
	// TargetPrefix selects actions whose target starts with it.
	TargetPrefix string
	// Tree selects the events the agent Tree's file tree is folded from
	// (treeOf).
	Tree string
	// Policy selects the definitions (policy.set) of the policy so named.
	Policy string
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
	return (visible == nil || visible[ev.Actor]) && q.matchesWho(ev) && q.matchesWhat(ev) && q.matchesWhen(ev)
}

// matchesWho checks the filters on who acted, under which envelope, in
// which session and in which trace.
func (q Query) matchesWho(ev *event.Event) bool {
	return (q.Actor == "" || ev.Actor == q.Actor) && (q.Tree == "" || treeOf(ev) == q.Tree) &&
		(q.Policy == "" || ev.Policy != nil && ev.Policy.Policy.Name == q.Policy) &&
		(q.Envelope == "" || envelopeOf(ev) == q.Envelope) &&
		(q.Session == "" || ev.Session == q.Session) &&
		(q.TraceID == "" || ev.TraceID == q.TraceID)
}

// matchesWhat checks the filters on what the event records.
func (q Query) matchesWhat(ev *event.Event) bool {
	a := ev.Action
	return (q.Kind == "" || string(ev.Kind) == q.Kind) &&
		(q.Type == "" || a != nil && string(a.Type) == q.Type) &&
		(q.Outcome == "" || outcomeOf(ev) == q.Outcome) &&
		(q.TargetPrefix == "" || a != nil && strings.HasPrefix(a.Target, q.TargetPrefix))
}

// matchesWhen checks the event's time against Since and Until.
func (q Query) matchesWhen(ev *event.Event) bool {
	return (q.Since.IsZero() || !ev.Time.Before(q.Since)) && (q.Until.IsZero() || !q.Until.Before(ev.Time))
}

// candidates yields the indexes of events that the sources' index keys
// name (every index when there are none), from start on, in order: the
// persisted index, then the tail folded since it was written.
func candidates(b *bolt.Bucket, tail []IndexedEvent, sources [][]byte, start, size uint64, oldest bool) func() (uint64, bool) {
	if len(sources) == 0 {
		return everyIndex(start, size, oldest)
	}
	streams := make([]func() (uint64, bool), len(sources))
	for j, src := range sources {
		streams[j] = newTermStream(b, tail, src, start, oldest).next
	}
	return mergeStreams(streams, oldest)
}

// everyIndex yields every index of a log of size from start on.
func everyIndex(start, size uint64, oldest bool) func() (uint64, bool) {
	i, done := start, size == 0
	return func() (uint64, bool) {
		if done || i >= size {
			return 0, false
		}
		v := i
		switch {
		case oldest:
			i++
		case i == 0:
			done = true
		default:
			i--
		}
		return v, true
	}
}

// mergedStreams yields the indexes of several streams, each in the page's
// order, as one stream in that order.
type mergedStreams struct {
	streams []func() (uint64, bool)
	heads   []streamHead // each stream's next index
	oldest  bool
}

type streamHead struct {
	index uint64
	ok    bool // false once the stream has ended
}

func mergeStreams(streams []func() (uint64, bool), oldest bool) func() (uint64, bool) {
	m := &mergedStreams{streams: streams, heads: make([]streamHead, len(streams)), oldest: oldest}
	for j := range streams {
		m.advance(j)
	}
	return m.next
}

func (m *mergedStreams) advance(j int) { m.heads[j].index, m.heads[j].ok = m.streams[j]() }

func (m *mergedStreams) next() (uint64, bool) {
	first := -1
	for j, h := range m.heads {
		if h.ok && (first < 0 || m.before(h.index, m.heads[first].index)) {
			first = j
		}
	}
	if first < 0 {
		return 0, false
	}
	v := m.heads[first].index
	m.advance(first)
	return v, true
}

// before reports whether index a comes before b in the page's order.
func (m *mergedStreams) before(a, b uint64) bool {
	if m.oldest {
		return a < b
	}
	return a > b
}

// termStream yields the indexes of one term from start on: newest first
// the unpersisted tail then the persisted blocks, oldest first the other
// way.
//
// The tail holds every folded event from its first index on, and persist
// may already have written some of them to the index: the persisted
// indexes are yielded only below the tail, so none is yielded twice.
type termStream struct {
	cursor *bolt.Cursor
	term   []byte
	prefix []byte // the term's keys start with it: term || 0x00
	start  uint64
	oldest bool
	below  uint64   // the tail's first index
	tail   []uint64 // the tail's indexes of the term, in the page's order
	// block: the indexes of the block read last not yet yielded, in the
	// page's order; begun: the cursor has been put on the first block;
	// persistedDone: the persisted indexes have all been yielded.
	block, buf           []uint64
	begun, persistedDone bool
}

func newTermStream(b *bolt.Bucket, tail []IndexedEvent, t []byte, start uint64, oldest bool) *termStream {
	s := &termStream{cursor: b.Cursor(), term: t, prefix: append(slices.Clone(t), 0), start: start, oldest: oldest, below: math.MaxUint64}
	if len(tail) > 0 {
		s.below = tail[0].Index
	}
	for _, ie := range tail {
		if slices.ContainsFunc(ie.Terms, func(x []byte) bool { return bytes.Equal(x, t) }) && s.reaches(ie.Index) {
			s.tail = append(s.tail, ie.Index)
		}
	}
	if !oldest {
		slices.Reverse(s.tail)
	}
	return s
}

// reaches reports whether index i is at or past start in the page's order.
func (s *termStream) reaches(i uint64) bool {
	if s.oldest {
		return i >= s.start
	}
	return i <= s.start
}

func (s *termStream) next() (uint64, bool) {
	if !s.oldest && len(s.tail) > 0 {
		return s.nextInTail()
	}
	if !s.persistedDone {
		if v, ok := s.nextPersisted(); ok {
			return v, true
		}
		s.persistedDone = true
	}
	return s.nextInTail()
}

func (s *termStream) nextInTail() (uint64, bool) {
	if len(s.tail) == 0 {
		return 0, false
	}
	v := s.tail[0]
	s.tail = s.tail[1:]
	return v, true
}

// nextPersisted yields the next persisted index from start on and below
// the tail.
func (s *termStream) nextPersisted() (uint64, bool) {
	for {
		for len(s.block) > 0 {
			i := s.block[0]
			s.block = s.block[1:]
			switch {
			case !s.reaches(i):
				// before start, in the block of start
			case i < s.below:
				return i, true
			case s.oldest:
				return 0, false // the tail takes over
			}
			// newest first: the tail has yielded it
		}
		if !s.readBlock() {
			return 0, false
		}
	}
}

// readBlock reads the next of the term's blocks in the page's order: at
// first the block of start or the nearest past it, then one block at a
// time. It reports false when the term has no more.
func (s *termStream) readBlock() bool {
	var key, value []byte
	switch {
	case !s.begun:
		s.begun = true
		key, value = s.seek()
	case s.oldest:
		key, value = s.cursor.Next()
	default:
		key, value = s.cursor.Prev()
	}
	if key == nil || !bytes.HasPrefix(key, s.prefix) || len(key) != len(s.prefix)+8 {
		return false
	}
	s.buf = decodeBlock(s.buf[:0], binary.BigEndian.Uint64(key[len(s.prefix):]), value)
	s.block = s.buf
	if !s.oldest {
		slices.Reverse(s.block)
	}
	return true
}

// seek puts the cursor on the term's block of start, or else oldest first
// on the block after it, newest first on the block before it.
func (s *termStream) seek() (key, value []byte) {
	at := blockKey(s.term, s.start/indexBlock)
	key, value = s.cursor.Seek(at)
	switch {
	case s.oldest || bytes.Equal(key, at):
		return key, value
	case key == nil:
		return s.cursor.Last()
	default:
		return s.cursor.Prev()
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
	sources, start := q.sources(visible), q.start(size)
	p := &pageBuilder{ctx: ctx, log: tl, q: q, visible: visible, size: size,
		page: &Page{Events: []Item{}}, bundles: map[uint64]*api.EntryBundle{}, targetNeedle: q.targetNeedle()}
	err := st.DB.View(func(tx *bolt.Tx) error {
		next := candidates(tx.Bucket(bucketHistory), tail(), sources, start, size, q.Oldest)
		for i, ok := next(); ok; i, ok = next() {
			if more, err := p.consider(i); err != nil || !more {
				return err
			}
		}
		return nil
	})
	return p.page, err
}

// sources are the index terms a page's candidates come from: the most
// selective indexed filter, else the viewer's actors, else none (every
// index).
func (q Query) sources(visible map[string]bool) [][]byte {
	switch {
	case q.Tree != "":
		return [][]byte{term(termTree, q.Tree)}
	case q.Policy != "":
		return [][]byte{term(termPolicy, q.Policy)}
	case q.TraceID != "":
		return [][]byte{term(termTrace, q.TraceID)}
	case q.Envelope != "":
		return [][]byte{term(termEnvelope, q.Envelope)}
	case q.Session != "":
		return [][]byte{term(termSession, q.Session)}
	case q.Actor != "":
		return [][]byte{term(termActor, q.Actor)}
	case visible != nil:
		var sources [][]byte
		for id := range visible {
			sources = append(sources, term(termActor, id))
		}
		return sources
	case q.Outcome == OutcomeDenied || q.Outcome == OutcomeHeld:
		return [][]byte{term(termOutcome, q.Outcome)}
	}
	return nil
}

// start is the index a page of a log of size starts from: the cursor, else
// the oldest or the newest event, always one the log holds.
func (q Query) start(size uint64) uint64 {
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
	return start
}

// pageBuilder fills one page from the candidates, reading their entries a
// bundle at a time and checking each against the query.
type pageBuilder struct {
	ctx     context.Context
	log     *logstore.Log
	q       Query
	visible map[string]bool
	size    uint64
	page    *Page
	bundles map[uint64]*api.EntryBundle // the bundles read so far
	// targetNeedle passes over unparsed the entries that cannot match
	// q.TargetPrefix (Query.targetNeedle).
	targetNeedle []byte
	// scanned counts the candidates considered, bytesOut the bytes of the
	// entries on the page; last is the last candidate, seen once there is
	// one.
	scanned, bytesOut int
	last              uint64
	seen              bool
}

// consider puts event i on the page if it matches the query. It returns
// false once the page is full or has read enough: NextCursor then says
// where the next page starts.
func (p *pageBuilder) consider(i uint64) (more bool, err error) {
	if i >= p.size {
		// Past the log the page reads: an event folded and persisted
		// after the page took its size, or an index a damaged block
		// names. Oldest first every candidate after it is past it too:
		// the page ends there, as a walk of the log ends at its size.
		return !p.q.Oldest, nil
	}
	if p.seen && p.last == i {
		return true, nil
	}
	p.last, p.seen = i, true
	if p.scanned++; p.scanned > maxHistoryScan || len(p.page.Events) == p.q.Limit || p.bytesOut > maxHistoryBytes {
		p.page.NextCursor = &i
		return false, nil
	}
	entry, err := entryAt(p.ctx, p.log, p.bundles, i, p.size)
	if err != nil {
		return false, err
	}
	if p.targetNeedle != nil && !bytes.Contains(entry, p.targetNeedle) {
		return true, nil // cannot match: not worth parsing
	}
	ev, err := event.Parse(entry)
	if err != nil {
		return false, fmt.Errorf("log entry %d: %w", i, err)
	}
	if p.q.Matches(ev, p.visible) {
		p.bytesOut += len(entry)
		leaf := event.LeafHash(entry)
		p.page.Events = append(p.page.Events, Item{Index: i, LeafHash: hex.EncodeToString(leaf[:]), Entry: entry, Event: ev})
	}
	return true, nil
}
