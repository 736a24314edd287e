package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/annal-dev/annal/internal/durable"
)

// syncProbe measures what one durable write costs on the disk of a data
// folder, in each of the forms a write-ahead log could use: the floor
// under a receipt, measured beside it (annal-bench receipt, the main run
// and growth: receiptsBesideSync). Its files sit
// in the folder it is given (the data folder's wal folder: the same file
// system, the same block groups), and are removed by close.
//
// Each form writes size bytes at a time, one after another, as the
// write-ahead log writes a lone client's record and commit record, and
// syncs with the write-ahead log's own fdatasync (internal/durable):
//
//   - append: write(2) at the end of a growing file, then fdatasync,
//     which then also writes the file's new size;
//   - overwrite: pwrite into space written with zeros and synced
//     beforehand, then fdatasync, which has no metadata to write (the
//     kernel's write-ahead log grows its segments so, wal.Options.GrowBytes);
//   - dsync: the same pwrite on a descriptor opened O_DSYNC, durable when
//     it returns: one system call instead of two;
//   - direct: O_DIRECT|O_DSYNC, the whole 4 KiB blocks that hold the
//     bytes, into the same kind of space (as the witness's journal does).
type syncProbe struct {
	size  int
	forms []*syncForm
	// cpu is this process's CPU time (user and system) in each form's
	// writes, by name: fdatasync's work is largely the system's, on
	// the two cores the receipt's client and server share.
	cpu map[string]time.Duration
}

// syncForm is one form's file, where it writes next, and what it costs.
type syncForm struct {
	name  string
	f     *os.File
	path  string
	off   int64
	limit int64 // the preallocated size it wraps around in; 0 for append
	block bool  // whole aligned blocks (O_DIRECT)
	sync  bool  // fdatasync after each write
	buf   []byte
	data  []byte // the bytes written each time, for the direct form
}

// probeSpace is the space each overwriting form writes into before it
// starts again at its beginning (writing zeros over it first, so that the
// disk and the page cache hold it as they hold a grown segment).
const probeSpace = 4 << 20

// probeBlock is the size and alignment of direct writes.
const probeBlock = 4096

// syncFormNames are the forms in the order they are measured and printed.
var syncFormNames = []string{"append", "overwrite", "dsync", "direct"}

// newSyncProbe opens, in dir, the files of the forms named (of
// syncFormNames; none: all) for durable writes of size bytes.
func newSyncProbe(dir string, size int, names ...string) (*syncProbe, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		names = syncFormNames
	}
	p := &syncProbe{size: size}
	for _, name := range names {
		form, err := openSyncForm(filepath.Join(dir, "bench-sync-probe-"+name), name, size)
		if errors.Is(err, errNoDirect) {
			continue // the file system refuses O_DIRECT: that form is not measured
		}
		if err != nil {
			p.close()
			return nil, fmt.Errorf("sync probe %s: %w", name, err)
		}
		p.forms = append(p.forms, form)
	}
	return p, nil
}

// errNoDirect is a system or file system without O_DIRECT writes.
var errNoDirect = errors.New("no direct writes here")

func openSyncForm(path, name string, size int) (*syncForm, error) {
	s := &syncForm{name: name, path: path}
	flags := os.O_RDWR | os.O_CREATE | os.O_TRUNC
	switch name {
	case "append":
		s.sync = true
	case "overwrite":
		s.sync, s.limit = true, probeSpace
	case "dsync":
		flags |= syncOpenFlag
		s.limit = probeSpace
	case "direct":
		if directOpenFlag == 0 {
			return nil, errNoDirect
		}
		flags |= syncOpenFlag | directOpenFlag
		s.limit, s.block = probeSpace, true
	}
	if s.limit > 0 {
		if err := writeZeros(path, s.limit); err != nil {
			return nil, err
		}
		flags &^= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		if name == "direct" {
			return nil, errNoDirect
		}
		return nil, err
	}
	s.f = f
	n := size
	if s.block {
		n = (size + 2*probeBlock - 1) &^ (probeBlock - 1) // what the blocks holding size bytes at any offset take
	}
	s.buf, s.data = durable.AlignedBlocks(n, probeBlock), make([]byte, size)
	for i := range s.data {
		s.data[i] = byte('a' + i%26)
	}
	copy(s.buf, s.data)
	return s, nil
}

// writeZeros makes path n bytes of written zeros, synced: space that a
// write changes no metadata of.
func writeZeros(path string, n int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, io.LimitReader(zeroReader{}, n))
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// write makes the form's next size bytes durable and returns how long
// that took.
func (s *syncForm) write(size int) (time.Duration, error) {
	if s.limit > 0 && s.off+int64(len(s.buf)) > s.limit {
		s.off = 0
	}
	b, at := s.buf[:size], s.off
	if s.block {
		at = s.off &^ (probeBlock - 1)
		end := (s.off + int64(size) + probeBlock - 1) &^ (probeBlock - 1)
		// The bytes go where they belong in their blocks; the rest of
		// the blocks is zeros (the earlier bytes of the first block are
		// not kept: the time is what the probe is for).
		b = s.buf[:end-at]
		clear(b)
		copy(b[s.off-at:], s.data)
	}
	start := time.Now()
	var err error
	if s.limit == 0 {
		_, err = s.f.Write(b)
	} else {
		_, err = s.f.WriteAt(b, at)
	}
	if err == nil && s.sync {
		err = durable.Fdatasync(s.f)
	}
	elapsed := time.Since(start)
	s.off += int64(size)
	return elapsed, err
}

// measure writes n times in each form, one form after another, and
// returns each form's times by name, and adds the CPU time this process
// spent on them to p.cpu (the writes are all it does meanwhile).
func (p *syncProbe) measure(n int, into map[string][]time.Duration) error {
	if p.cpu == nil {
		p.cpu = map[string]time.Duration{}
	}
	for _, s := range p.forms {
		cpu0 := selfCPU()
		for range n {
			d, err := s.write(p.size)
			if err != nil {
				return fmt.Errorf("sync probe %s: %w", s.name, err)
			}
			into[s.name] = append(into[s.name], d)
		}
		p.cpu[s.name] += selfCPU() - cpu0
	}
	return nil
}

func (p *syncProbe) close() {
	for _, s := range p.forms {
		s.f.Close()
		os.Remove(s.path)
	}
}
