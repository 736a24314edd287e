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
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/cli"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// receiptOptions are the receipt mode's.
type receiptOptions struct {
	baseline  string
	block     int
	syncBytes int
	// clients are the clients measured, of receiptClientKinds.
	clients []string
	// clientTrace, if set, is where a runtime trace of this process (the
	// clients' side of the receipts) goes: go tool trace reads it.
	clientTrace string
	// clientProfile, if set, is where a CPU profile of this process goes.
	clientProfile string
}

func receiptCommand(o *options) *cobra.Command {
	var r receiptOptions
	cmd := &cobra.Command{
		Use:   "receipt",
		Short: "The receipt p50 of one sequential client against the disk's own durable write, measured in the same run",
		Long: `annal-bench receipt starts annald (its own process) on a fresh data folder and measures the
receipt latency of one sequential client (POST /v1/actions of observe actions) through the product's
client (client/) and, in blocks of its own, through the bench's lean poster (loadconn), in blocks of
--block. After each round of blocks come as many durable writes of --sync-bytes (the size of a lone
receipt's write-ahead write) in the data folder's wal folder, in each form a write-ahead log could
use: append + fdatasync, overwrite of written space + fdatasync (the kernel's), pwrite O_DSYNC, and
O_DIRECT|O_DSYNC. It prints the p50s, the CPU each took, and the ratios of each receipt p50 to each
p50. With --baseline-annald, that annald (say, an earlier build) gets its own data folder and its
own blocks, interleaved with the others (A, B, then B, A).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReceipt(cmd.Context(), *o, r, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.baseline, "baseline-annald", "", "an annald binary measured the same way on its own data folder, interleaved (\"\": none)")
	f.IntVar(&r.block, "block", 100, "receipts (and durable writes of each form) in a block")
	f.IntVar(&r.syncBytes, "sync-bytes", 0, "bytes of each durable write (0: what the first block's receipts wrote to the write-ahead log, a write each)")
	f.StringSliceVar(&r.clients, "clients", []string{"product", "lean"}, "the clients measured, each in blocks of its own: product (client/), lean (the bench's poster)")
	f.StringVar(&r.clientProfile, "client-cpuprofile", "", "write a CPU profile of this process, the clients' side, to this file")
	f.StringVar(&r.clientTrace, "client-trace", "", "write a runtime trace (go tool trace) of this process, the clients' side, to this file")
	return cmd
}

// receiptServer is one annald of the receipt mode, and its receipts by
// client kind (receiptClientKinds).
type receiptServer struct {
	name string
	data string
	p    *annaldProcess
	lat  map[string][]time.Duration
	// cpu is annald's CPU time over all its blocks of receipts, of both
	// clients.
	cpu time.Duration
}

// receiptClientKinds are the clients a receipt can be measured through,
// and how their rows are named: the product's client (client/, over
// net/http's Transport), and the bench's lean poster (loadconn: one
// goroutine, its own HTTP/1.1 framing, no reflection), the least a client
// can do, which shows what the client's side of a receipt costs.
var receiptClientKinds = map[string]string{
	"product": "",
	"lean":    ", lean poster",
}

// firstLat is the receipts of the first client measured.
func (s *receiptServer) firstLat(r receiptOptions) []time.Duration {
	return s.lat[r.clients[0]]
}

func runReceipt(ctx context.Context, o options, r receiptOptions, out io.Writer) error {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	if err := r.check(o.sequentialN); err != nil {
		return err
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
	servers, err := startReceiptServers(ctx, dir, o, r.baseline)
	defer func() {
		for _, s := range servers {
			s.p.stop()
		}
	}()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "annal-bench receipt: %d receipts a server in blocks of %d, interleaved with durable writes; %s; data in %s%s\n\n",
		o.sequentialN, r.block, loadAverage(), dir, placement)
	stopTrace, err := startTrace(r.clientTrace)
	if err != nil {
		return err
	}
	if r.clientProfile != "" {
		stopProfile, err := cli.StartCPUProfile(r.clientProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	m, err := measureReceipts(ctx, servers, r, o.sequentialN)
	stopTrace()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if err := s.p.stop(); err != nil {
			return err
		}
	}
	return writeReceiptTable(out, servers, r, m)
}

// check refuses blocks that do not fit n receipts, and clients it does
// not know.
func (r *receiptOptions) check(n int) error {
	if r.block < 1 || n < r.block {
		return fmt.Errorf("--block %d, --sequential %d: a block of 1 or more, and at least one block", r.block, n)
	}
	if len(r.clients) == 0 {
		r.clients = []string{"product", "lean"}
	}
	for _, c := range r.clients {
		if _, ok := receiptClientKinds[c]; !ok {
			return fmt.Errorf("--clients %q: product or lean", c)
		}
	}
	return nil
}

// startReceiptServers starts annald, and the baseline annald if one is
// given, each on a data folder of its own in dir. The servers started
// are returned even with an error, for the caller to stop.
func startReceiptServers(ctx context.Context, dir string, o options, baseline string) ([]*receiptServer, error) {
	servers := []*receiptServer{{name: "annald", data: filepath.Join(dir, "receipt"), lat: map[string][]time.Duration{}}}
	bins := []string{o.annald}
	if baseline != "" {
		servers = append(servers, &receiptServer{name: "baseline", data: filepath.Join(dir, "receipt-baseline"), lat: map[string][]time.Duration{}})
		bins = append(bins, baseline)
	}
	for i, s := range servers {
		p, err := startAnnald(ctx, bins[i], s.data, o)
		if err != nil {
			return servers[:i], fmt.Errorf("%s: %w", s.name, err)
		}
		s.p = p
	}
	return servers, nil
}

// startTrace starts a runtime trace of this process into path, if one is
// asked for, and returns how to stop it.
func startTrace(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		trace.Stop()
		f.Close()
	}, nil
}

// receiptMeasures are the durable writes the receipt mode measured beside
// the receipts: their size, each form's times and CPU time.
type receiptMeasures struct {
	size  int
	syncs map[string][]time.Duration
	cpu   map[string]time.Duration
}

// receiptClient submits one observe action and waits for its receipt.
type receiptClient func() error

// receiptClients are each server's clients, by kind; closeAll closes
// their connections.
func receiptClients(ctx context.Context, servers []*receiptServer) (clients []map[string]receiptClient, closeAll func(), err error) {
	req := api.ActionRequest{Type: "observe", Target: "workspace/seq"}
	var posters []*actionPoster
	closeAll = func() { closePosters(posters) }
	for _, s := range servers {
		product, err := client.New(s.p.url, s.p.cred)
		if err != nil {
			return nil, closeAll, err
		}
		p, err := newActionPoster(s.p.url, s.p.cred)
		if err != nil {
			return nil, closeAll, err
		}
		posters = append(posters, p)
		clients = append(clients, map[string]receiptClient{
			"product": func() error { _, err := product.Submit(ctx, req); return err },
			"lean":    func() error { return p.submit(ctx, req) },
		})
	}
	return clients, closeAll, nil
}

// receiptBlock submits n receipts one after another and adds their
// latencies to into.
func receiptBlock(name string, n int, submit receiptClient, into *[]time.Duration) error {
	for range n {
		start := time.Now()
		if err := submit(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		*into = append(*into, time.Since(start))
	}
	return nil
}

// serverBlocks runs server s's blocks of one round (one of each client
// measured) and adds the CPU time annald took to s.cpu.
func (s *receiptServer) serverBlocks(r receiptOptions, clients map[string]receiptClient) error {
	cpu0, err := s.p.cpu()
	if err != nil {
		return err
	}
	for _, kind := range r.clients {
		lat := s.lat[kind]
		if err := receiptBlock(s.name+receiptClientKinds[kind], r.block, clients[kind], &lat); err != nil {
			return err
		}
		s.lat[kind] = lat
	}
	cpu1, err := s.p.cpu()
	s.cpu += cpu1 - cpu0
	return err
}

// measureReceipts runs the rounds: a block of receipts from each server,
// in the order A, B and then B, A, then a block of durable writes of each
// form, until each server has n receipts.
func measureReceipts(ctx context.Context, servers []*receiptServer, r receiptOptions, n int) (receiptMeasures, error) {
	m := receiptMeasures{size: r.syncBytes, syncs: map[string][]time.Duration{}}
	clients, closeClients, err := receiptClients(ctx, servers)
	defer closeClients()
	if err != nil {
		return m, err
	}
	var probe *syncProbe
	defer func() {
		if probe != nil {
			probe.close()
		}
	}()
	for done, round := 0, 0; done < n; done, round = done+r.block, round+1 {
		for k := range servers {
			i := k
			if round%2 == 1 {
				i = len(servers) - 1 - k
			}
			if err := servers[i].serverBlocks(r, clients[i]); err != nil {
				return m, err
			}
		}
		if probe == nil {
			walDir := filepath.Join(servers[0].data, walDirName)
			if m.size <= 0 {
				m.size = lastWALWriteBytes(walDir)
			}
			if probe, err = newSyncProbe(walDir, m.size); err != nil {
				return m, err
			}
		}
		if err := probe.measure(r.block, m.syncs); err != nil {
			return m, err
		}
	}
	m.cpu = probe.cpu
	return m, nil
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
func writeReceiptTable(out io.Writer, servers []*receiptServer, r receiptOptions, m receiptMeasures) error {
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
			fmt.Fprintf(tw, "\t%.2fx", float64(percentile(s.firstLat(r), 50))/float64(p50))
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
		n := 0
		for _, lat := range s.lat {
			n += len(lat)
		}
		cpu := each(s.cpu, n) + " (annald, its receipts)"
		for _, kind := range r.clients {
			line("receipt, "+s.name+receiptClientKinds[kind], s.lat[kind], cpu)
		}
	}
	for _, name := range syncFormNames {
		if lat := m.syncs[name]; len(lat) > 0 {
			line(fmt.Sprintf("durable write of %d B, %s", m.size, syncFormLabel[name]), lat, each(m.cpu[name], len(lat)))
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
