package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel"
)

// fixture holds what a real kernel hands out, written to files as a user of
// the annal CLI would have them.
type fixture struct {
	dir            string
	key            string
	keyFile        string
	entries        []string // entry files, by index
	proofs         []string // tlog-proof files, by index
	oldCP, newCP   string
	consistency    string
	oldSize, size  uint64
	otherLogKey    string
	otherLogProofs string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &fixture{dir: t.TempDir()}
	k := openKernel(t, filepath.Join(f.dir, "data"))
	defer k.Close()
	f.key = k.VerifierKey()
	f.keyFile = f.write("log.pub", []byte(f.key+"\n"))

	root := authenticateRoot(t, k)
	submit := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := k.Submit(ctx, root, kernel.ActionRequest{
				Type: "create", Target: fmt.Sprintf("notes/%d", i), Payload: json.RawMessage(`{"text":"hello"}`),
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	submit(3)
	old := awaitCheckpoint(t, ctx, k, 4) // genesis + 3
	f.oldSize = old.Size
	f.oldCP = f.write("old.checkpoint", old.Raw)
	submit(6)
	cp := awaitCheckpoint(t, ctx, k, 10)
	f.size = cp.Size
	f.newCP = f.write("new.checkpoint", cp.Raw)
	for i := uint64(0); i < f.size; i++ {
		entry, err := k.Entry(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		p, err := k.InclusionProof(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		f.entries = append(f.entries, f.write(fmt.Sprintf("%d.event", i), entry))
		f.proofs = append(f.proofs, f.write(fmt.Sprintf("%d.tlog-proof", i), p.Marshal()))
	}
	hashes, err := k.ConsistencyProof(ctx, f.oldSize, f.size)
	if err != nil {
		t.Fatal(err)
	}
	f.consistency = f.write("consistency", checkpoints.MarshalHashes(hashes))
	return f
}

func (f *fixture) write(name string, data []byte) string {
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		panic(err)
	}
	return p
}

func openKernel(t *testing.T, dir string) *kernel.Kernel {
	t.Helper()
	cfg := kernel.DefaultConfig(dir)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.CheckpointInterval = 100 * time.Millisecond
	// No energy.produced event in the middle of a test's actions, however
	// slowly a loaded machine runs them.
	cfg.Energy.TickMillis = uint64(time.Hour / time.Millisecond)
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func authenticateRoot(t *testing.T, k *kernel.Kernel) *kernel.Actor {
	t.Helper()
	cred, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		t.Fatal(err)
	}
	root, err := k.Authenticate(strings.TrimSpace(string(cred)))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func awaitCheckpoint(t *testing.T, ctx context.Context, k *kernel.Kernel, size uint64) *checkpoints.SignedCheckpoint {
	t.Helper()
	if _, err := k.AwaitInclusionProof(ctx, size-1); err != nil {
		t.Fatal(err)
	}
	cp, err := k.LatestCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestProof_EveryEntryOfARealLog(t *testing.T) {
	f := newFixture(t)
	for i := range f.entries {
		code, out, errOut := runCLI("proof", "--key", f.key, "--entry", f.entries[i], f.proofs[i])
		if code != 0 {
			t.Fatalf("entry %d: exit %d: %s", i, code, errOut)
		}
		if !strings.Contains(out, fmt.Sprintf("is entry %d of %s", i, strings.Split(f.key, "+")[0])) {
			t.Fatalf("entry %d: output %q", i, out)
		}
	}
	// The key from a file, and --json.
	code, out, errOut := runCLI("proof", "--key", "@"+f.keyFile, "--entry", f.entries[2], "--json", f.proofs[2])
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		OK    bool   `json:"ok"`
		Index uint64 `json:"index"`
		Event struct {
			Type, Target string
		} `json:"event"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK || res.Index != 2 || res.Event.Type != "create" || res.Event.Target != "notes/1" {
		t.Fatalf("json output %q (%v)", out, err)
	}
}

func TestProof_FailuresExitNonZeroNamingTheCheck(t *testing.T) {
	f := newFixture(t)
	tampered := f.write("tampered.event", bytes.Replace(mustRead(t, f.entries[3]), []byte("notes/"), []byte("notez/"), 1))
	_, otherKey, err := checkpoints.GenerateLogKey(strings.Split(f.key, "+")[0])
	if err != nil {
		t.Fatal(err)
	}
	proof := mustRead(t, f.proofs[3])
	badSig := f.write("badsig.tlog-proof", bytes.Replace(proof, []byte(fmt.Sprintf("\n%d\n", f.size)), []byte(fmt.Sprintf("\n%d\n", f.size+1)), 1))
	big := f.write("big", bytes.Repeat([]byte("x"), checkpoints.MaxTLogProofSize+1))
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"entry of another index", []string{"proof", "--key", f.key, "--entry", f.entries[4], f.proofs[3]}, 1, "FAILED inclusion"},
		{"tampered entry", []string{"proof", "--key", f.key, "--entry", tampered, f.proofs[3]}, 1, "FAILED inclusion"},
		{"another key, same origin", []string{"proof", "--key", otherKey, "--entry", f.entries[3], f.proofs[3]}, 1, "FAILED checkpoint signature"},
		{"checkpoint body edited", []string{"proof", "--key", f.key, "--entry", f.entries[3], badSig}, 1, "FAILED checkpoint signature"},
		{"entry file is a proof", []string{"proof", "--key", f.key, "--entry", f.proofs[3], f.proofs[3]}, 1, "FAILED entry"},
		{"proof file is an entry", []string{"proof", "--key", f.key, "--entry", f.entries[3], f.entries[3]}, 1, "FAILED proof format"},
		{"key not a key", []string{"proof", "--key", "nonsense", "--entry", f.entries[3], f.proofs[3]}, 1, "FAILED verifier key"},
		{"oversize proof", []string{"proof", "--key", f.key, "--entry", f.entries[3], big}, 1, "larger than"},
		{"missing file", []string{"proof", "--key", f.key, "--entry", f.entries[3], filepath.Join(f.dir, "nope")}, 1, "no such file"},
		{"no key", []string{"proof", "--entry", f.entries[3], f.proofs[3]}, 2, "--key is required"},
		{"no entry", []string{"proof", "--key", f.key, f.proofs[3]}, 2, "--entry is required"},
		{"no proof", []string{"proof", "--key", f.key, "--entry", f.entries[3]}, 2, "takes 1 file argument"},
		{"unknown flag", []string{"proof", "--nope"}, 2, "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.want)
			}
			if strings.Contains(out, "OK") {
				t.Fatalf("printed OK on failure: %q", out)
			}
		})
	}
}

func TestConsistency(t *testing.T) {
	f := newFixture(t)
	code, out, errOut := runCLI("consistency", "--key", f.key, "--proof", f.consistency, f.oldCP, f.newCP)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, fmt.Sprintf("at size %d is a prefix of itself at size %d", f.oldSize, f.size)) {
		t.Fatalf("output %q", out)
	}
	// Swapped checkpoints, a proof with one hash changed, and a missing proof.
	code, _, errOut = runCLI("consistency", "--key", f.key, "--proof", f.consistency, f.newCP, f.oldCP)
	if code != 1 || !strings.Contains(errOut, "FAILED consistency") {
		t.Fatalf("swapped: exit %d, %q", code, errOut)
	}
	hashes, err := checkpoints.ParseHashes(mustRead(t, f.consistency))
	if err != nil || len(hashes) == 0 {
		t.Fatalf("fixture proof: %d hashes, %v", len(hashes), err)
	}
	hashes[0][0] ^= 1
	bad := f.write("bad.consistency", checkpoints.MarshalHashes(hashes))
	code, _, errOut = runCLI("consistency", "--key", f.key, "--proof", bad, f.oldCP, f.newCP)
	if code != 1 || !strings.Contains(errOut, "FAILED consistency") {
		t.Fatalf("bad proof: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI("consistency", "--key", f.key, f.oldCP, f.newCP)
	if code != 2 || !strings.Contains(errOut, "--proof is required") {
		t.Fatalf("no proof: exit %d, %q", code, errOut)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
