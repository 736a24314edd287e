package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/matrixbridge/matrixtest"
)

// TestREADMEMatrixSection runs the README's "Holds in a Matrix room" as
// pasted, with bash, against the Dendrite of .ci/services: its ```sh block
// (its last line, the bridge, in the background) and its matrix.json. The
// only rewrites are the site's own names: go run ./cmd/annal is the annal
// binary, http://127.0.0.1:8008 the homeserver's URL, :localhost its
// server name, !ROOM-ID:localhost the room the test made. Then a hold of
// an agent alice created is posted to the room and alice approves it
// there, and the log names her.
func TestREADMEMatrixSection(t *testing.T) {
	hs := matrixtest.Need(t)
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Holds in a Matrix room\n")
	if !ok {
		t.Fatal(`the README has no section "Holds in a Matrix room"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	shBlock := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	jsonBlock := regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(section)
	if shBlock == nil || jsonBlock == nil {
		t.Fatal("the section has no ```sh or no ```json block")
	}

	dir := t.TempDir()
	d := startDaemon(t, filepath.Join(dir, "annal-data"))
	const botPassword, alicePassword = "readme-bot-password", "readme-alice-password"
	bot := hs.User(t, "annal", botPassword)
	aliceMx := hs.User(t, "alice", alicePassword)
	room := matrixtest.NewRoom(t, aliceMx, bot.UserID)
	site := strings.NewReplacer("go run ./cmd/annal ", "annal ", "http://127.0.0.1:8008", hs.URL,
		"!ROOM-ID:localhost", string(room.ID), ":localhost", ":"+hs.ServerName)
	writeTestFile(t, filepath.Join(dir, "bot.password"), botPassword+"\n")
	writeTestFile(t, filepath.Join(dir, "matrix.json"), site.Replace(jsonBlock[1]))

	lines := strings.Split(strings.TrimRight(site.Replace(shBlock[1]), "\n"), "\n")
	setup, bridgeLine := strings.Join(lines[:len(lines)-1], "\n"), lines[len(lines)-1]
	if !strings.HasPrefix(bridgeLine, "annal ") || !strings.Contains(bridgeLine, " matrix --config matrix.json") {
		t.Fatalf("the block's last line is not the bridge: %q", bridgeLine)
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(annalBinary)+string(os.PathListSeparator)+os.Getenv("PATH"), "ANNAL_SERVER="+d.url)
	sh := exec.Command("bash", "-euo", "pipefail", "-c", setup)
	sh.Dir, sh.Env = dir, env
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the README's commands: %v\n%s", err, out)
	}
	bridge := exec.Command("bash", "-c", "exec "+bridgeLine)
	bridge.Dir, bridge.Env = dir, env
	var stderr syncBuffer
	bridge.Stderr = &stderr
	if err := bridge.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- bridge.Wait() }()
	t.Cleanup(func() {
		_ = bridge.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the bridge exited with %v on SIGTERM; stderr:\n%s", err, &stderr)
			}
		case <-time.After(10 * time.Second):
			_ = bridge.Process.Kill()
			t.Errorf("the bridge did not stop on SIGTERM")
		}
	})
	room.WaitPost(t, "Annal bridge started")

	// alice (the human the README made) creates an agent whose releases
	// wait for a human, and answers its hold in the room.
	ctx := context.Background()
	cred, err := os.ReadFile(filepath.Join(dir, "alice.cred"))
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := client.New(d.url, strings.TrimSpace(string(cred)))
	me, err := alice.WhoAmI(ctx)
	if err != nil || me.Kind != "human" || me.Name != "alice" {
		t.Fatalf("alice.cred is %+v (%v), want the human alice", me, err)
	}
	trust := 0.8
	agent, err := alice.CreateAgent(ctx, api.AgentRequest{Name: "scribe", Purpose: "release notes", Energy: 500, Trust: &trust,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: agent.ID, Budget: 100,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}},
		HoldOn: []api.Grant{{Pattern: "workspace/release/*", Actions: []string{"mutate"}}}}); err != nil {
		t.Fatal(err)
	}
	agentC, _ := client.New(d.url, agent.Credential)
	rc, err := agentC.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/release/v1"})
	if err != nil || rc.HoldID == "" {
		t.Fatalf("the release was not held: %+v %v", rc, err)
	}
	room.WaitPost(t, "Hold "+rc.HoldID, "mutate workspace/release/v1", "hold_on workspace/release/*")
	room.Say(t, aliceMx, "!approve "+rc.HoldID+" release checked", "")
	room.WaitPost(t, "Hold "+rc.HoldID+" approved by alice ("+me.ID+")", "release checked")
	if h, err := alice.Hold(ctx, rc.HoldID); err != nil || h.AnsweredBy != me.ID || h.Reason != "release checked" {
		t.Fatalf("the hold after alice's approval in the room: %+v %v", h, err)
	}
}

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
