package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/session"
	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// TestBundle_RealKernelExportVerifies: a real kernel exports; annal-verify
// bundle accepts it, prints the summary, and refuses it with one byte
// changed.
func TestBundle_RealKernelExportVerifies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	k := openKernel(t, filepath.Join(dir, "data"))
	defer k.Close()
	root := authenticateRoot(t, k)
	for i := range 20 {
		if _, err := k.Submit(ctx, root, kernel.ActionRequest{Type: "create", Target: fmt.Sprintf("notes/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	old := awaitCheckpoint(t, ctx, k, 8)
	cp := awaitCheckpoint(t, ctx, k, 21)
	oldFile := filepath.Join(dir, "old.checkpoint")
	os.WriteFile(oldFile, old.Raw, 0o644)
	var buf bytes.Buffer
	from, to := uint64(3), uint64(15)
	if _, err := k.Export(ctx, kernel.ExportSelection{From: &from, To: &to, OldSize: old.Size}, &buf, nil); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "b.bundle")
	os.WriteFile(file, buf.Bytes(), 0o644)

	code, out, errOut := runCLI("bundle", "--key", k.VerifierKey(), "--old", oldFile, file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"OK: 12 events of " + k.Origin(), "every entry of [3, 15)", "by actor: root 12", "by action type: create 12", fmt.Sprintf("checkpoint size %d", cp.Size)} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI("bundle", "--key", k.VerifierKey(), "--json", file)
	var j struct {
		OK     bool   `json:"ok"`
		Events uint64 `json:"events"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil || !j.OK || j.Events != 12 {
		t.Fatalf("--json: exit %d, %s", code, out)
	}
	bad := bytes.Clone(buf.Bytes())
	bad[len(bad)/2] ^= 0x01
	os.WriteFile(file, bad, 0o644)
	code, _, errOut = runCLI("bundle", "--key", k.VerifierKey(), file)
	if code != 1 || !strings.Contains(errOut, "FAILED") {
		t.Fatalf("a changed byte: exit %d, %s", code, errOut)
	}
	if code, _, _ := runCLI("bundle", file); code != 2 {
		t.Fatalf("no key nor policy: exit %d, want 2", code)
	}
}

// deltaLog builds a log of n session.delta events with the kernel's own
// encoders (kernel/event, kernel/delta) and a compact range, signs its
// checkpoint, and writes it as a range bundle; broken, if >= 0, is the
// delta whose content is changed after sealing.
func deltaLog(t *testing.T, n, broken int) (bundle []byte, vkey string) {
	t.Helper()
	skey, vkey, err := checkpoints.GenerateLogKey("log.annal.example/chain")
	if err != nil {
		t.Fatal(err)
	}
	f := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	r := f.NewEmptyRange(0)
	var lines []byte
	parent := delta.ZeroHash
	for i := range n {
		ts := fmt.Sprintf("2026-11-22T12:00:%02dZ", i)
		d := &delta.Delta{DeltaID: fmt.Sprintf("019a5c3e-0000-7000-9000-%012x", i), TurnID: fmt.Sprintf("t%d", i), SessionID: "s-9",
			AgentDID: "agent-b", Timestamp: ts, ParentHash: parent,
			Changes: []delta.Change{{Path: "README.md", Operation: delta.OpModify, ContentHash: "sha256:" + strings.Repeat(strconv.Itoa(i%10), 64)}}}
		if err := d.Seal(); err != nil {
			t.Fatal(err)
		}
		parent = d.DeltaHash
		if i == broken {
			d.Changes[0].Path = "SECRET.md"
		}
		entry, err := event.Encode(&event.Event{V: 1, ID: fmt.Sprintf("019a5c3e-0000-7000-8000-%012x", i), Time: mustInstant(t, ts), Kind: event.KindSessionDelta,
			Actor: "agent-b", Session: "s-9", Delta: d})
		if err != nil && i != broken {
			t.Fatal(err)
		}
		if i == broken && err == nil {
			t.Fatal("the kernel encoded a delta whose hash does not recompute")
		}
		if i == broken { // encode by hand what the kernel refuses to
			raw, _ := json.Marshal(&event.Event{V: 1, ID: fmt.Sprintf("019a5c3e-0000-7000-8000-%012x", i), Time: mustInstant(t, ts), Kind: event.KindSessionDelta, Actor: "agent-b", Session: "s-9", Delta: d})
			entry, _ = jcs.Transform(raw)
		}
		leaf := sha256.Sum256(append([]byte{0}, entry...))
		r.Append(leaf[:], nil)
		lines = fmt.Appendf(lines, `{"entry":"%s","index":%d}`+"\n", base64.StdEncoding.EncodeToString(entry), i)
	}
	root, _ := r.GetRootHash(nil)
	s, _ := checkpoints.NewLogSigner(skey)
	cp, err := checkpoints.SignCheckpoint(checkpoints.Checkpoint{Origin: s.Name(), Size: uint64(n), Hash: [32]byte(root)}, s)
	if err != nil {
		t.Fatal(err)
	}
	header, _ := json.Marshal(map[string]any{"bundle": "annal.dev/audit-bundle/v1", "checkpoint": string(cp), "proof": "range",
		"selection": map[string]any{"from": 0, "to": n}})
	header, _ = jcs.Transform(header)
	out := append(header, '\n')
	out = append(out, lines...)
	return fmt.Appendf(out, `{"end":"annal.dev/audit-bundle/v1","events":%d}`+"\n", n), vkey
}

func TestChain(t *testing.T) {
	dir := t.TempDir()
	good, vkey := deltaLog(t, 3, -1)
	file := filepath.Join(dir, "chain.bundle")
	os.WriteFile(file, good, 0o644)
	code, out, errOut := runCLI("chain", "--key", vkey, file)
	if code != 0 || !strings.Contains(out, "OK: session s-9: a complete chain of 3 deltas") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	bad, vkey := deltaLog(t, 3, 1)
	os.WriteFile(file, bad, 0o644)
	code, _, errOut = runCLI("chain", "--key", vkey, file)
	if code != 1 || !strings.Contains(errOut, "delta chain") || !strings.Contains(errOut, "is not the hash of its members") {
		t.Fatalf("a changed delta: exit %d, %s", code, errOut)
	}
}

// TestChain_RealKernel: an agent's turns recorded through the kernel, the
// session's deltas exported; annal-verify chain accepts the whole chain
// and refuses a bundle that starts mid-chain.
func TestChain_RealKernel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	k := openKernel(t, filepath.Join(dir, "data"))
	defer k.Close()
	root := authenticateRoot(t, k)
	trust := 0.8
	na, err := k.CreateAgent(ctx, root, kernel.ActorRequest{Name: "coder", Purpose: "writes code", Trust: &trust})
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := k.Authenticate(na.Credential)
	if _, _, err := k.CreateSession(ctx, root, "work", session.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []kernel.SessionChange{{Op: "state", State: "HANDSHAKING"}, {Op: "join", Agent: agent.ID}, {Op: "state", State: "ACTIVE"}} {
		if _, err := k.ChangeSession(ctx, root, "work", c); err != nil {
			t.Fatal(err)
		}
	}
	var second uint64
	for i := range 3 {
		rc, _, err := k.AppendDelta(ctx, agent, "work", kernel.DeltaRequest{TurnID: fmt.Sprint("turn-", i),
			Changes: []delta.Change{{Path: fmt.Sprint("f", i), Operation: delta.OpCreate, ContentHash: "sha256:" + strings.Repeat("ab", 32)}}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			second = rc.Index
		}
		awaitCheckpoint(t, ctx, k, rc.Index+1)
	}
	export := func(sel kernel.ExportSelection) string {
		t.Helper()
		var buf bytes.Buffer
		if _, err := k.Export(ctx, sel, &buf, nil); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, fmt.Sprint(len(buf.Bytes()), ".bundle"))
		os.WriteFile(file, buf.Bytes(), 0o644)
		return file
	}
	whole := export(kernel.ExportSelection{Session: "work", Kind: string(event.KindSessionDelta)})
	code, out, errOut := runCLI("chain", "--key", k.VerifierKey(), whole)
	if code != 0 || !strings.Contains(out, "complete chain of 3 deltas") {
		t.Fatalf("whole chain: exit %d: %s%s", code, out, errOut)
	}
	mid := export(kernel.ExportSelection{From: &second, Session: "work", Kind: string(event.KindSessionDelta)})
	code, _, errOut = runCLI("chain", "--key", k.VerifierKey(), mid)
	if code != 1 || !strings.Contains(errOut, "the chain is not complete") {
		t.Fatalf("mid-chain bundle: exit %d, %s", code, errOut)
	}
}

func mustInstant(t *testing.T, s string) event.Instant {
	t.Helper()
	i, err := event.ParseInstant(s)
	if err != nil {
		t.Fatal(err)
	}
	return i
}
