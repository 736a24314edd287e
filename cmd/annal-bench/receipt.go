package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/trace"
	"text/tabwriter"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// receiptOptions are the receipt mode's.
type receiptOptions struct {
	baseline  string
	block     int
	syncBytes int
	// clients are the clients measured: "product", "lean", or both.
	clients string
	// clientTrace, if set, is where a runtime trace of this process (the
	// clients' side of the receipts) goes: go tool trace reads it.
	clientTrace string
}

func receiptCommand(o *options) *cobra.Command {
	var r receiptOptions
	cmd := &cobra.Command{
		Use:   "receipt",
		Short: "The receipt p50 of one sequential client against the disk's own durable write, measured in the same run",
		Long: `annal-bench receipt starts annald (its own process) on a fresh data folder and measures the receipt
latency of one sequential client (POST /v1/actions of observe actions, through the product's client and,
in blocks of their own, through the bench's lean poster) in blocks of --block, each block followed by a block of durable writes of --sync-bytes (the size of a lone
receipt's write-ahead write) in the data folder's wal folder, in each form a write-ahead log could use:
append + fdatasync, overwrite of written space + fdatasync, pwrite O_DSYNC, and O_DIRECT|O_DSYNC
(A, B, A, B, --rounds times, --sequential receipts in all). It prints the p50s and the ratio
receipt p50 / fdatasync p50 of each form. With --baseline-annald, that annald (say, an earlier build)
gets its own data folder and its own blocks of receipts, interleaved with the others.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReceipt(cmd.Context(), *o, r, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.baseline, "baseline-annald", "", "an annald binary measured the same way on its own data folder, interleaved (\"\": none)")
	f.IntVar(&r.block, "block", 100, "receipts (and durable writes of each form) in a block")
	f.IntVar(&r.syncBytes, "sync-bytes", 0, "bytes of each durable write (0: what the first block's receipts wrote to the write-ahead log, a write each)")
	f.StringVar(&r.clients, "clients", "both", "the clients measured: product (client/), lean (the bench's poster), or both")
	f.StringVar(&r.clientTrace, "client-trace", "", "write a runtime trace (go tool trace) of this process, the clients' side, to this file")
	return cmd
}

// receiptServer is one annald of the receipt mode, and its receipts:
// through the product's client (client/, net/http under it) and through
// the bench's lean poster (loadconn: one goroutine, its own HTTP/1.1
// framing), which shows what the client's side of a receipt costs.
type receiptServer struct {
	name    string
	data    string
	p       *annaldProcess
	lat     []time.Duration
	leanLat []time.Duration
	// cpu is annald's CPU time over all its blocks of receipts, of both
	// clients.
	cpu time.Duration
}

// firstLat is the receipts of the first client measured: the product's
// client, unless only the lean poster was.
func (s *receiptServer) firstLat() []time.Duration {
	if len(s.lat) > 0 {
		return s.lat
	}
	return s.leanLat
}

func runReceipt(ctx context.Context, o options, r receiptOptions, out io.Writer) error {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	if r.block < 1 || o.sequentialN < r.block {
		return fmt.Errorf("--block %d, --sequential %d: a block of 1 or more, and at least one block", r.block, o.sequentialN)
	}
	if r.clients == "" {
		r.clients = "both"
	}
	if r.clients != "both" && r.clients != "product" && r.clients != "lean" {
		return fmt.Errorf("--clients %q: product, lean or both", r.clients)
	}
	dir, placement, cleanup, err := benchFolder(o.dir)
	if err != nil {
		return err
	}
	defer cleanup()
	if o.annald, err = chooseAnnald(ctx, dir, o.annald, out); err != nil {
		return err
	}
	if o.annald == inProcess {
		return fmt.Errorf("receipt measures annald as deployed: it needs annald as its own process, not --annald %s", inProcess)
	}
	servers := []*receiptServer{{name: "annald", data: filepath.Join(dir, "receipt")}}
	if r.baseline != "" {
		servers = append(servers, &receiptServer{name: "baseline", data: filepath.Join(dir, "receipt-baseline")})
	}
	for _, s := range servers {
		bin := o.annald
		if s.name == "baseline" {
			bin = r.baseline
		}
		if s.p, err = startAnnald(ctx, bin, s.data, o); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		defer s.p.stop()
	}
	fmt.Fprintf(out, "annal-bench receipt: %d receipts a server in blocks of %d, interleaved with durable writes; %s; data in %s%s\n\n",
		o.sequentialN, r.block, loadAverage(), dir, placement)
	if r.clientTrace != "" {
		tf, err := os.Create(r.clientTrace)
		if err != nil {
			return err
		}
		defer tf.Close()
		if err := trace.Start(tf); err != nil {
			return err
		}
		defer trace.Stop()
	}
	syncs, size, syncCPU, err := measureReceipts(ctx, servers, r, o.sequentialN)
	if err != nil {
		return err
	}
	for _, s := range servers {
		if err := s.p.stop(); err != nil {
			return err
		}
	}
	return writeReceiptTable(out, servers, syncs, size, syncCPU)
}

// measureReceipts runs the blocks: receipts of each server, then durable
// writes of each form, until each server has n receipts.
func measureReceipts(ctx context.Context, servers []*receiptServer, r receiptOptions, n int) (syncs map[string][]time.Duration, size int, syncCPU map[string]time.Duration, err error) {
	req := api.ActionRequest{Type: "observe", Target: "workspace/seq"}
	clients := make([]func() error, len(servers))
	leans := make([]func() error, len(servers))
	for i, s := range servers {
		c, err := newClient(s.p.url, s.p.cred, 1)
		if err != nil {
			return nil, 0, nil, err
		}
		clients[i] = func() error {
			_, err := c.Submit(ctx, req)
			return err
		}
		lean, err := newActionPoster(s.p.url, s.p.cred)
		if err != nil {
			return nil, 0, nil, err
		}
		defer lean.conn.Close()
		leans[i] = func() error { return lean.submit(ctx, req) }
	}
	block := func(name string, submit func() error, into *[]time.Duration) error {
		for range r.block {
			start := time.Now()
			if err := submit(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			*into = append(*into, time.Since(start))
		}
		return nil
	}
	syncs = map[string][]time.Duration{}
	var probe *syncProbe
	defer func() {
		if probe != nil {
			probe.close()
		}
	}()
	size = r.syncBytes
	for done, round := 0, 0; done < n; done, round = done+r.block, round+1 {
		for k := range servers {
			i := k
			if round%2 == 1 { // every other round the other way round: A, B, B, A
				i = len(servers) - 1 - k
			}
			s := servers[i]
			cpu0, err := s.p.cpu()
			if err != nil {
				return nil, 0, nil, err
			}
			if r.clients != "lean" {
				if err := block(s.name, clients[i], &s.lat); err != nil {
					return nil, 0, nil, err
				}
			}
			if r.clients != "product" {
				if err := block(s.name+", lean poster", leans[i], &s.leanLat); err != nil {
					return nil, 0, nil, err
				}
			}
			cpu1, err := s.p.cpu()
			if err != nil {
				return nil, 0, nil, err
			}
			s.cpu += cpu1 - cpu0
		}
		if probe == nil {
			if size <= 0 {
				size = lastWALWriteBytes(filepath.Join(servers[0].data, walDirName))
			}
			var err error
			if probe, err = newSyncProbe(filepath.Join(servers[0].data, walDirName), size); err != nil {
				return nil, 0, nil, err
			}
		}
		if err := probe.measure(r.block, syncs); err != nil {
			return nil, 0, nil, err
		}
	}
	return syncs, size, probe.cpu, nil
}

// lastWALWriteBytes is the size of the last write in the write-ahead
// log folder walDir (its records and its commit record), as a lone
// client's receipt writes it; 512 if it cannot be told. It walks the
// newest segment's records (kernel/internal/wal, format.go: a record is
// a 16-byte head and its entry, whose length is the low 31 bits of its
// first word; a commit record, 24 bytes, has bit 30 of it set).
func lastWALWriteBytes(walDir string) int {
	const fallback = 512
	segments, _ := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if len(segments) == 0 {
		return fallback
	}
	raw, err := os.ReadFile(segments[len(segments)-1]) // names sort by index
	if err != nil || len(raw) < 16 {
		return fallback
	}
	last, write := 0, 0
	for off := 16; off+8 <= len(raw); {
		word := binary.BigEndian.Uint32(raw[off:])
		switch {
		case word == 0:
			off = len(raw) // zeros: the records end
		case word&(1<<30) != 0: // a commit record ends the write
			write += 24
			last, write = write, 0
			off += 24
		default:
			n := 16 + int(word&^(1<<31))
			write += n
			off += n
		}
	}
	if last == 0 {
		return fallback
	}
	return last
}

// walDirName is the write-ahead log's folder in a data folder
// (kernel/internal/logstore.WALDirName).
const walDirName = "wal"

// writeReceiptTable prints the p50 and p99 of each server's receipts and
// of each form's durable writes, and the ratios of the receipts' p50s to
// the writes'.
func writeReceiptTable(out io.Writer, servers []*receiptServer, syncs map[string][]time.Duration, size int, syncCPU map[string]time.Duration) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "measure\tn\tp50\tp99\tCPU each")
	for _, s := range servers {
		fmt.Fprintf(tw, "\t%s p50 / this p50", s.name)
	}
	fmt.Fprintln(tw)
	line := func(name string, lat []time.Duration, cpu string) {
		p50 := percentile(lat, 50)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s", name, len(lat), fmtMicros(p50), fmtMicros(percentile(lat, 99)), cpu)
		for _, s := range servers {
			fmt.Fprintf(tw, "\t%.2fx", float64(percentile(s.firstLat(), 50))/float64(p50))
		}
		fmt.Fprintln(tw)
	}
	each := func(cpu time.Duration, n int) string {
		if cpu <= 0 || n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f µs", float64(cpu.Microseconds())/float64(n))
	}
	for _, s := range servers {
		// annald's CPU is of all its receipts, both clients' (read from
		// /proc/<pid>/stat in 10 ms ticks, over all the blocks).
		cpu := each(s.cpu, len(s.lat)+len(s.leanLat)) + " (annald, its receipts)"
		if len(s.lat) > 0 {
			line("receipt, "+s.name, s.lat, cpu)
		}
		if len(s.leanLat) > 0 {
			line("receipt, "+s.name+", lean poster", s.leanLat, cpu)
		}
	}
	for _, name := range syncFormNames {
		if lat := syncs[name]; len(lat) > 0 {
			line(fmt.Sprintf("durable write of %d B, %s", size, syncFormLabel[name]), lat, each(syncCPU[name], len(lat)))
		}
	}
	return tw.Flush()
}

// syncFormLabel says what each form of the sync probe does.
var syncFormLabel = map[string]string{
	"append":    "append + fdatasync",
	"overwrite": "overwrite + fdatasync (the WAL's form)",
	"dsync":     "pwrite O_DSYNC",
	"direct":    "O_DIRECT|O_DSYNC 4 KiB blocks",
}
