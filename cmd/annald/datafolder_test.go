package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/transparency-dev/merkle/rfc6962"
)

func annald(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(annaldBinary, args...).CombinedOutput()
	return string(out), err
}

// submitN sends n observe actions as root and returns how many succeeded.
func submitN(t *testing.T, d *daemon, n int) {
	t.Helper()
	c := d.client(t, d.rootCredential(t))
	for i := range n {
		if _, err := c.Submit(context.Background(), api.ActionRequest{Type: "observe", Target: fmt.Sprintf("workspace/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDamagedFolderIsRefusedVerifiedAndRepaired(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d := startDaemon(t, dir)
	submitN(t, d, 300)
	d.stop(t)
	pub, _ := os.ReadFile(filepath.Join(dir, "log.pub"))

	tile := filepath.Join(dir, "log", "tile", "0", "001.p")
	entries, err := os.ReadDir(tile)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no partial level-0 tile 1: %v", err)
	}
	// The newest partial is the widest.
	newest := filepath.Join(tile, entries[len(entries)-1].Name())
	for _, e := range entries {
		if len(e.Name()) > len(filepath.Base(newest)) || (len(e.Name()) == len(filepath.Base(newest)) && e.Name() > filepath.Base(newest)) {
			newest = filepath.Join(tile, e.Name())
		}
	}
	raw, _ := os.ReadFile(newest)
	os.WriteFile(newest, raw[:len(raw)/2], 0o644)

	if _, err := tryStartDaemon(dir); err == nil || !strings.Contains(err.Error(), newest) {
		t.Fatalf("serve on a truncated tile: %v", err)
	}
	if out, err := annald(t, "verify", "--data", dir); err == nil || !strings.Contains(out, newest) {
		t.Fatalf("verify on a truncated tile: %v\n%s", err, out)
	}
	out, err := annald(t, "repair", "--data", dir)
	if err != nil || !strings.Contains(out, "mended "+newest) {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	if out, err := annald(t, "verify", "--data", dir); err != nil || !strings.Contains(out, "hash to its signed tree") {
		t.Fatalf("verify after repair: %v\n%s", err, out)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "log.pub")); string(now) != string(pub) {
		t.Fatal("repair changed log.pub")
	}
	d = startDaemon(t, dir)
	submitN(t, d, 1)
}

func TestMissingKeyIsRefusedByEveryCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d := startDaemon(t, dir)
	d.stop(t)
	key := filepath.Join(dir, "log.key")
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if _, err := tryStartDaemon(dir); err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("serve without log.key: %v", err)
	}
	for _, cmd := range []string{"rebuild", "repair"} {
		if out, err := annald(t, cmd, "--data", dir); err == nil || !strings.Contains(out, key) {
			t.Fatalf("%s without log.key: %v\n%s", cmd, err, out)
		}
	}
	if _, err := os.Stat(key); err == nil {
		t.Fatal("a command made a new log.key")
	}
}

// A byte flipped in the newest acknowledged write of the write-ahead log
// after a kill -9 (a disk that returns bad data) stops annald serve at
// start, and rebuild and audit with it, with the segment, the offset, the
// indices at risk and the repair route in the message; restoring the
// segment (here: putting the byte back) starts it again with every entry.
func TestDamagedWriteAheadIsRefusedWithTheRepairRoute(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d := startDaemon(t, dir)
	submitN(t, d, 40)
	d.kill(t)
	segments, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if len(segments) == 0 {
		t.Fatal("no write-ahead segment")
	}
	segment := segments[len(segments)-1]
	data, err := os.ReadFile(segment)
	if err != nil {
		t.Fatal(err)
	}
	// FORMATS.md: the last write's records, then its 24-byte commit
	// record, then perhaps zeros.
	end := len(bytes.TrimRight(data, "\x00"))
	if end < 16+24 || data[end-24] != 0x40 {
		t.Fatalf("the segment does not end with a commit record: %x", data[max(0, end-24):end])
	}
	damaged := bytes.Clone(data)
	damaged[end-24-2] ^= 0x01 // in the last record's entry
	if err := os.WriteFile(segment, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = tryStartDaemon(dir)
	if err == nil {
		t.Fatal("annald serve started on a damaged write-ahead log")
	}
	t.Logf("annald serve: %v", err)
	wants := []string{segment, "the write-ahead log is damaged at offset", "is at risk", "copy the whole data folder to a good disk",
		"restore this segment from a backup", "Never delete or truncate the segment"}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("serve's refusal does not say %q:\n%v", want, err)
		}
	}
	for _, cmd := range []string{"rebuild", "audit"} {
		if out, err := annald(t, cmd, "--data", dir); err == nil || !strings.Contains(out, segment) || !strings.Contains(out, "is at risk") {
			t.Errorf("%s on a damaged write-ahead log: %v\n%s", cmd, err, out)
		}
	}
	if now, _ := os.ReadFile(segment); !bytes.Equal(now, damaged) {
		t.Fatal("a refused start changed the segment")
	}
	if err := os.WriteFile(segment, data, 0o600); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, dir)
	submitN(t, d, 1)
	d.stop(t)
}

// SIGTERM under load: annald stops within 5 s and leaves no temporary file;
// every receipt it gave is in the log when it starts again.
func TestGracefulStopIsQuickUnderLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d := startDaemon(t, dir)
	c := d.client(t, d.rootCredential(t))
	var mu sync.Mutex
	var receipts []*api.Receipt
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rc, err := c.Submit(context.Background(), api.ActionRequest{Type: "observe", Target: fmt.Sprintf("workspace/%d/%d", w, i)})
				if err != nil {
					return // the daemon is stopping
				}
				mu.Lock()
				receipts = append(receipts, rc)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second)
	start := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		d.exited <- err
	case <-time.After(10 * time.Second):
		t.Fatalf("annald still runs 10 s after SIGTERM; stderr:\n%s", d.stderr)
	}
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if took > 5*time.Second {
		t.Fatalf("a stop under load took %v", took)
	}
	temp := regexp.MustCompile(`^(?:[0-9]{4,}|(?:checkpoint|treeState|gcState|version)[0-9]+)$`)
	filepath.WalkDir(filepath.Join(dir, "log"), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && (temp.MatchString(e.Name()) || (filepath.Ext(filepath.Dir(p)) == ".p" && len(e.Name()) > 3)) {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
	if len(receipts) == 0 {
		t.Fatal("no action went through before the stop")
	}
	d2 := startDaemon(t, dir)
	c2 := d2.client(t, d2.rootCredential(t))
	for _, rc := range receipts {
		raw, err := c2.Event(context.Background(), rc.Index)
		if err != nil {
			t.Fatalf("receipt %d after the stop: %v", rc.Index, err)
		}
		if leaf := fmt.Sprintf("%x", rfc6962.DefaultHasher.HashLeaf(raw)); leaf != rc.LeafHash {
			t.Fatalf("receipt %d: the log holds another entry", rc.Index)
		}
	}
	t.Logf("stopped in %v under load of 32 clients; %d receipts checked", took.Round(time.Millisecond), len(receipts))
}

// --max-connections caps the connections served at once, and
// --idle-timeout closes a connection that sends nothing.
func TestConnectionsAreCappedAndIdleOnesClosed(t *testing.T) {
	d := startDaemon(t, filepath.Join(t.TempDir(), "data"), "--max-connections", "1", "--idle-timeout", "1500ms")
	addr := strings.TrimPrefix(d.url, "http://")
	hog, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	// Make sure the hog holds the one slot: a request on it is answered.
	fmt.Fprintf(hog, "GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := bufio.NewReader(hog).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	quick := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := quick.Get(d.url + "/v1/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("a second connection was served while the cap of 1 was taken")
	}
	// The idle hog is closed by the server; then others are served.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := (&http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get(d.url + "/v1/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle connection was never closed: %v", err)
		}
	}
}

// A taken port fails the start before a new data folder is made.
func TestTakenPortLeavesNoDataFolder(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := filepath.Join(t.TempDir(), "data")
	out, err := annald(t, "serve", "--data", dir, "--listen", taken.Addr().String())
	if err == nil || !strings.Contains(out, "address already in use") {
		t.Fatalf("serve on a taken port: %v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a failed start left a data folder: %v", err)
	}
}
