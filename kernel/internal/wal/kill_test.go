package wal

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// appendChildEnv names the folder TestAppendChild appends to.
const appendChildEnv = "ANNAL_WAL_APPEND_CHILD"

// killOptions make segments small, so that kills also land around the
// start of a segment.
var killOptions = Options{SegmentBytes: 32 << 10}

// TestAppendChild is the process TestKillNineDuringAppendsLosesNoAcknowledgedWrite
// kills: it opens the log (recovering what the last kill left), prints
// what Open found, then appends groups of 1 to 8 entries as fast as it can,
// printing after each Append returns (an acknowledgement) the index after
// the group, until it is killed.
func TestAppendChild(t *testing.T) {
	dir := os.Getenv(appendChildEnv)
	if dir == "" {
		t.Skip("run by TestKillNineDuringAppendsLosesNoAcknowledgedWrite")
	}
	l, _, info, err := Open(dir, 0, killOptions)
	if err != nil {
		fmt.Printf("OPEN FAILED %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("OPENED torn=%d uncommitted=%d next=%d\n", info.TornBytes, info.UncommittedRecords, l.Next())
	for i := 0; ; i++ {
		next := l.Next()
		n := 1 + i%8
		if err := l.Append(next, entriesFrom(next, n)); err != nil {
			fmt.Printf("APPEND FAILED %v\n", err)
			os.Exit(1)
		}
		os.Stdout.WriteString("ACK " + strconv.FormatUint(next+uint64(n), 10) + "\n") // unbuffered
	}
}

// TestKillNineDuringAppendsLosesNoAcknowledgedWrite kills a process that
// appends as fast as it can with SIGKILL at random moments, seeded, again
// and again on one folder: at any instant (during a write, between its
// fdatasync and its commit record, while a segment is made) every write
// whose Append returned reads back, every start opens the log without
// refusing it, and the log carries on from where it was left.
func TestKillNineDuringAppendsLosesNoAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(11, 27))
	const rounds = 16
	var acked uint64 // the index after the last acknowledged entry
	recovered := map[string]int{}
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAppendChild$")
		cmd.Env = append(os.Environ(), appendChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		if !lines.Scan() || !strings.HasPrefix(lines.Text(), "OPENED ") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the child did not open the log: %q", round, lines.Text())
		}
		var torn, uncommitted int
		var next uint64
		fmt.Sscanf(lines.Text(), "OPENED torn=%d uncommitted=%d next=%d", &torn, &uncommitted, &next)
		if next < acked {
			t.Fatalf("round %d: the log continues at %d, but entries up to %d were acknowledged", round, next, acked-1)
		}
		if torn > 0 {
			recovered["torn tail cut"]++
		}
		if uncommitted > 0 {
			recovered["last write committed at Open"]++
		}
		killed := make(chan struct{})
		go func() {
			time.Sleep(time.Duration(2+rng.IntN(40)) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGKILL)
			close(killed)
		}()
		for lines.Scan() {
			if v, ok := strings.CutPrefix(lines.Text(), "ACK "); ok {
				if n, err := strconv.ParseUint(v, 10, 64); err == nil {
					acked = max(acked, n)
				}
			} else if strings.Contains(lines.Text(), "FAILED") {
				t.Errorf("round %d: the child says %q", round, lines.Text())
			}
		}
		<-killed
		cmd.Wait()

		// What the kill left holds every acknowledged entry, read as
		// Open will (Read changes nothing).
		records, _, err := Read(dir, 0)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if uint64(len(records)) < acked {
			t.Fatalf("round %d: %d records after the kill, but %d were acknowledged", round, len(records), acked)
		}
		checkRecords(t, records, 0, uint64(len(records)))
	}
	l, records, _ := mustOpen(t, dir, 0, killOptions)
	defer l.Close()
	checkRecords(t, records, 0, uint64(len(records)))
	if uint64(len(records)) < acked || acked == 0 {
		t.Fatalf("%d records, %d acknowledged", len(records), acked)
	}
	t.Logf("%d rounds, %d entries acknowledged in %d segments; starts found: %v", rounds, acked, len(segmentNames(t, dir)), recovered)
}
