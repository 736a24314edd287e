package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/internal/execute"
)

// Exit codes of annal exec that are its own, not the command's (as a shell
// uses 126 and 127).
const (
	// exitNotAllowed: the kernel denied the command, or a human rejected it
	// (or its hold timed out): it never started.
	exitNotAllowed = 126
	// exitNotRecorded: the command ran but its result could not be
	// committed; its intent stays open in the log.
	exitNotRecorded = 125
	// exitNotFound: the command could not be started (its result is
	// recorded with this exit code).
	exitNotFound = 127
)

// exitError ends annal with a code of its own choosing; main prints msg
// (if any) and exits with code.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

type execFlags struct {
	target, envelope, session string
	artifact                  string
	private, keepBlobs        bool
	noStdin                   bool
	holdWait                  time.Duration
	receipt                   string
}

func execCommand(g *globalFlags) *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] -- COMMAND [ARGS...]",
		Short: "Run a command as an execute action: decided (and held for a human) before it starts, its outcome recorded after",
		Long: `annal exec asks the kernel before it runs COMMAND: an execute intent on --target (default
exec/<command name>) naming the command line and the SHA-256 of its stdin (input_oid), logged with
the argv unless --private. Denied, rejected or timed out: the command never starts and annal exits
126. Held: annal says so on stderr and waits for a human's answer (--hold-wait). Allowed: the command
runs with stdin, stdout and stderr passed through unchanged, and annal records the result — the
SHA-256 of stdout (output_oid) and of stderr, of --artifact FILE (artifact_hash; else stdout's), the
exit code and the output size — then exits with the command's own exit code (128+N for signal N).
If the result cannot be recorded annal says why and exits 125; a command that cannot be started is
recorded with exit code 127. With --keep-blobs the canonical command line, stdin, stdout, stderr
and the artifact are also stored on annald (annald serve --keep-blobs) under their OIDs.
A stdin that is a terminal is not read: the command gets an empty stdin.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExec(cmd, g, &f, args)
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false) // annal exec ls -la: the flags after COMMAND are its own
	fl.StringVar(&f.target, "target", "", "the action's target (default exec/<command name>)")
	fl.StringVar(&f.envelope, "envelope", "", "the envelope to act under (default: the oldest that grants it)")
	fl.StringVar(&f.session, "session", "", "the session the command runs in")
	fl.StringVar(&f.artifact, "artifact", "", "a file the command writes: its SHA-256 is the artifact_hash")
	fl.BoolVar(&f.private, "private", false, "log only the command line's hash, not its argv (policies then cannot match it)")
	fl.BoolVar(&f.keepBlobs, "keep-blobs", false, "store the command line, stdin, stdout, stderr and artifact on annald under their OIDs")
	fl.BoolVar(&f.noStdin, "no-stdin", false, "give the command an empty stdin")
	fl.DurationVar(&f.holdWait, "hold-wait", time.Hour, "how long to wait for a human to answer a held command")
	fl.StringVar(&f.receipt, "receipt", "", "write the intent's and the result's receipts to this file (JSON)")
	return cmd
}

// execTarget is the default target of a command: exec/<its base name>,
// with characters a target may not hold replaced.
func execTarget(argv0 string) string {
	name := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\\' || r == '/' {
			return '_'
		}
		return r
	}, filepath.Base(argv0))
	if name == "." || name == ".." || name == "" {
		name = "_"
	}
	return "exec/" + name
}

func runExec(cmd *cobra.Command, g *globalFlags, f *execFlags, argv []string) error {
	c, err := g.client(true)
	if err != nil {
		return err
	}
	if f.target == "" {
		f.target = execTarget(argv[0])
	}
	stdin, stdinOID, cleanup, err := spoolStdin(cmd.InOrStdin(), f.noStdin)
	if err != nil {
		return err
	}
	defer cleanup()
	e := &execution{argv: argv, target: f.target, envelope: f.envelope, session: f.session, private: f.private, keepBlobs: f.keepBlobs,
		holdWait: f.holdWait, stdin: stdin, stdinOID: stdinOID, stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(),
		artifactHash: func(outputOID string) string { return f.artifactHash(cmd.Context(), g, c, outputOID) }}
	ran, err := e.run(cmd.Context(), g, c)
	if err != nil {
		return err
	}
	if f.receipt != "" {
		var out struct {
			Intent uint64       `json:"intent"`
			Hold   string       `json:"hold_id,omitempty"`
			Result *api.Receipt `json:"result"`
		}
		out.Intent, out.Hold, out.Result = ran.intent.Index, ran.intent.HoldID, ran.result
		if err := writeReceipts(f.receipt, out); err != nil {
			g.notef("annal: --receipt: %v", err)
		}
	}
	if ran.code != 0 {
		return &exitError{code: ran.code}
	}
	return nil
}

// execution is one command run as an execute: decided (and held for a
// human) before it starts, its result recorded after. annal exec runs one,
// and so does annal sagas run for a compensation that is a command.
type execution struct {
	argv                      []string
	target, envelope, session string
	private, keepBlobs        bool
	holdWait                  time.Duration
	stdin                     *os.File // nil: an empty stdin
	stdinOID                  string
	stdout, stderr            io.Writer
	// artifactHash is the result's artifact_hash given stdout's OID; nil:
	// stdout's OID.
	artifactHash func(outputOID string) string
}

// executed is what the log holds of an execution: its intent, its
// result's receipt and the exit code recorded.
type executed struct {
	intent *client.Intent
	result *api.Receipt
	code   int
}

// run decides, runs and records e. Its error is an *exitError:
// exitNotAllowed when the command never started, exitNotRecorded when it
// ran but its result could not be committed.
func (e *execution) run(ctx context.Context, g *globalFlags, c *client.Client) (*executed, error) {
	input, err := execute.CanonicalCommand(e.argv, e.stdinOID)
	if err != nil {
		return nil, err
	}
	about := map[string]any{"stdin_oid": e.stdinOID}
	if !e.private {
		about["argv"] = e.argv
	}
	hctx, cancel := context.WithTimeout(ctx, e.holdWait+g.timeout)
	defer cancel()
	intent, err := c.DecideIntent(hctx, e.target, e.envelope, e.session, oid.Of(input), about, func(hold string) {
		g.notef("annal: %s on %s is held for a human (hold %s); waiting up to %v", "execute", e.target, hold, e.holdWait)
	}, 250*time.Millisecond)
	if err != nil {
		return nil, notAllowed(err)
	}
	if e.keepBlobs {
		keepBlobs(ctx, g, c, input, readBack(g, e.stdin))
	}
	stdout, stderr := newTee(e.stdout, e.keepBlobs), newTee(e.stderr, e.keepBlobs)
	code := runCommand(e.argv, e.stdin, stdout, stderr, func(err error) { g.notef("annal: %v", err) })
	result := execute.Result{OutputOID: stdout.oid(), ExitCode: int32(code), OutputBytes: stdout.n + stderr.n,
		About: map[string]any{"stderr_oid": stderr.oid()}}
	result.ArtifactHash = result.OutputOID
	if e.artifactHash != nil {
		result.ArtifactHash = e.artifactHash(result.OutputOID)
	}
	if e.keepBlobs {
		keepBlobs(ctx, g, c, stdout.blob(g, "stdout"), stderr.blob(g, "stderr"))
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
	defer rcancel()
	rc, err := c.RecordResult(rctx, intent, result)
	if err != nil {
		return nil, &exitError{code: exitNotRecorded, msg: fmt.Sprintf("annal: the command exited %d but its result could not be recorded (intent %d stays open in the log): %v", code, intent.Index, err)}
	}
	return &executed{intent: intent, result: rc, code: code}, nil
}

// notAllowed is annal exec's exit when the kernel did not allow the
// command: denied, rejected by a human, or not decided at all.
func notAllowed(err error) *exitError {
	var refused *client.HoldRefusedError
	var denied *client.Error
	if errors.As(err, &refused) || (errors.As(err, &denied) && denied.Status == 403) {
		return &exitError{code: exitNotAllowed, msg: "annal: not run: " + err.Error()}
	}
	return &exitError{code: exitNotAllowed, msg: "annal: not run, the kernel did not allow it: " + err.Error()}
}

// artifactHash is the result's artifact_hash: the SHA-256 of --artifact
// (kept on annald with --keep-blobs), else stdout's, outputOID.
func (f *execFlags) artifactHash(ctx context.Context, g *globalFlags, c *client.Client, outputOID string) string {
	if f.artifact == "" {
		return outputOID
	}
	data, err := os.ReadFile(f.artifact)
	if err != nil {
		g.notef("annal: --artifact: %v; artifact_hash is stdout's", err)
		return outputOID
	}
	if f.keepBlobs {
		keepBlobs(ctx, g, c, data)
	}
	return oid.Of(data)
}

// spoolStdin reads stdin whole into a temporary file (hashing it), so its
// digest is known before the command is decided; the command then reads
// the file. A terminal, or --no-stdin, gives an empty stdin.
func spoolStdin(in io.Reader, none bool) (*os.File, string, func(), error) {
	nothing := func() {}
	if f, ok := in.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			none = true
		}
	}
	if none || in == nil {
		return nil, oid.Of(nil), nothing, nil
	}
	tmp, err := os.CreateTemp("", "annal-exec-stdin-")
	if err != nil {
		return nil, "", nothing, err
	}
	cleanup := func() { tmp.Close(); os.Remove(tmp.Name()) }
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), in); err != nil {
		cleanup()
		return nil, "", nothing, fmt.Errorf("read stdin: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, "", nothing, err
	}
	return tmp, "sha256:" + hex.EncodeToString(h.Sum(nil)), cleanup, nil
}

// tee passes a stream through unchanged while hashing and counting it (and
// keeping it, for --keep-blobs).
type tee struct {
	w    io.Writer
	h    hash.Hash
	n    uint64
	keep bool
	kept []byte
}

func newTee(w io.Writer, keep bool) *tee { return &tee{w: w, h: sha256.New(), keep: keep} }

func (t *tee) Write(p []byte) (int, error) {
	t.h.Write(p)
	t.n += uint64(len(p))
	if t.keep && len(t.kept)+len(p) <= client.MaxBlobBody {
		t.kept = append(t.kept, p...)
	}
	if _, err := t.w.Write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (t *tee) oid() string { return "sha256:" + hex.EncodeToString(t.h.Sum(nil)) }

// blob is what was kept of the stream, if it was kept whole.
func (t *tee) blob(g *globalFlags, name string) []byte {
	if uint64(len(t.kept)) != t.n {
		g.notef("annal: --keep-blobs: %s is larger than a blob may be; only its OID is logged", name)
		return nil
	}
	return t.kept
}

// runCommand runs argv and returns its exit code: 128+N when signal N
// ended it, exitNotFound when it could not start. SIGINT, SIGTERM and
// SIGHUP sent to annal go to the command.
func runCommand(argv []string, stdin *os.File, stdout, stderr io.Writer, note func(error)) int {
	run := exec.Command(argv[0], argv[1:]...)
	if stdin != nil {
		run.Stdin = stdin
	}
	run.Stdout, run.Stderr = stdout, stderr
	if err := run.Start(); err != nil {
		note(err)
		return exitNotFound
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	for {
		select {
		case s := <-signals:
			_ = run.Process.Signal(s)
		case err := <-done:
			var exit *exec.ExitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &exit):
				if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return exit.ExitCode()
			default:
				note(err)
				return exitNotFound
			}
		}
	}
}

// keepBlobs stores each non-empty blob on annald; a failure is said, and
// does not stop the command (the log has the OIDs either way).
func keepBlobs(ctx context.Context, g *globalFlags, c *client.Client, blobs ...[]byte) {
	for _, b := range blobs {
		if len(b) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, g.timeout)
		if _, err := c.PutBlob(ctx, b); err != nil {
			g.notef("annal: --keep-blobs: %v", err)
		}
		cancel()
	}
}

// readBack reads a spooled stdin for --keep-blobs and rewinds it; nil when
// there is none or it is larger than a blob may be.
func readBack(g *globalFlags, f *os.File) []byte {
	if f == nil {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, client.MaxBlobBody+1))
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	switch {
	case err != nil:
		g.notef("annal: --keep-blobs: stdin: %v", err)
		return nil
	case len(b) > client.MaxBlobBody:
		g.notef("annal: --keep-blobs: stdin is larger than a blob may be; only its OID is logged")
		return nil
	}
	return b
}

func writeReceipts(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
