package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/mod/sumdb/note"
)

const (
	// omniwitnessPackage and omniwitnessVersion are the witness the issue
	// names as the baseline.
	omniwitnessPackage = "github.com/transparency-dev/witness/cmd/omniwitness"
	omniwitnessVersion = "v0.0.0-20260617164027-9332986a94a4"
	// annalWitnessPackage is built from the module the bench runs in.
	annalWitnessPackage = "github.com/annal-dev/annal/cmd/annal-witness"

	annalWitnessName = "bench.example/annal-witness"
	omniwitnessName  = "bench.example/omniwitness"

	// startTimeout bounds the wait for a witness to listen.
	startTimeout = time.Minute
	// stopTimeout is how long a witness has to exit after SIGTERM before it
	// is killed.
	stopTimeout = 10 * time.Second
)

// witnessProcess is a witness running as a subprocess, listening on
// 127.0.0.1.
type witnessProcess struct {
	name    string
	url     string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

// startProcess starts bin with args, its stderr, and its stdout unless
// stdout is given, appended to logPath. Files, not Go writers, so that
// waiting for the process never waits for its output to be copied (a
// grandchild holding a pipe open would block it).
func startProcess(name, bin string, args []string, logPath string, stdout *os.File) (*witnessProcess, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &witnessProcess{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM and waits for the process to exit, killing it after
// stopTimeout. It may be called more than once.
func (p *witnessProcess) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.cmd.Process.Kill()
	}
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// failure wraps err with the end of the process's log.
func (p *witnessProcess) failure(err error) error {
	return fmt.Errorf("%s: %w; end of its log %s:\n%s", p.name, err, p.logPath, tail(p.logPath, 2000))
}

func tail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// goBuild runs the go command in dir with extra environment, bounded by
// ctx, and reports its output on failure.
func goBuild(ctx context.Context, dir string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// buildAnnalWitness builds annal-witness from the module the bench runs
// in (the current directory must be inside it) into dir.
func buildAnnalWitness(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "annal-witness")
	if err := goBuild(ctx, "", nil, "build", "-o", bin, annalWitnessPackage); err != nil {
		return "", fmt.Errorf("%w(run the bench from the annal module, or give --annal-witness)", err)
	}
	return bin, nil
}

// buildOmniwitness installs omniwitness at omniwitnessVersion from the
// module proxy into dir/bin. It builds in an empty folder outside any
// module, with -mod=mod, so that the bench's go.mod is neither read nor
// changed.
func buildOmniwitness(ctx context.Context, dir string) (string, error) {
	work := filepath.Join(dir, "omniwitness-build")
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return "", err
	}
	env := []string{"GOBIN=" + bin, "GOFLAGS=-mod=mod", "GOWORK=off"}
	if err := goBuild(ctx, work, env, "install", omniwitnessPackage+"@"+omniwitnessVersion); err != nil {
		return "", fmt.Errorf("%w(give a prebuilt binary with --omniwitness, or --skip-omniwitness)", err)
	}
	return filepath.Join(bin, "omniwitness"), nil
}

// startAnnalWitness configures every log with `annal-witness logs add`,
// then runs `annal-witness serve` on 127.0.0.1 with a data folder in dir,
// and returns once it listens.
func startAnnalWitness(ctx context.Context, bin, dir string, logs []*benchLog, args ...string) (*witnessProcess, error) {
	data := filepath.Join(dir, "annal-witness-data")
	for _, l := range logs {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		out, err := exec.CommandContext(ctx, bin, "logs", "add", "--data", data, "--origin", l.origin, "--key", l.vkey).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("annal-witness logs add %s: %w\n%s", l.origin, err, out)
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p, err := startProcess("annal-witness", bin,
		append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0", "--name", annalWitnessName}, args...),
		filepath.Join(dir, "annal-witness.log"), pw)
	pw.Close() // the child has its own copy
	if err != nil {
		pr.Close()
		return nil, err
	}
	// serve prints its address once it listens; the rest of its output is
	// drained so that it never blocks on a full pipe. The read ends when
	// every holder of the pipe's write end has exited.
	addr := make(chan string, 1)
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "annal-witness: listening on "); ok {
				select {
				case addr <- u:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case p.url = <-addr:
		return p, nil
	case <-p.exited:
		return nil, p.failure(fmt.Errorf("exited before listening: %v", p.waitErr))
	case <-t.C:
		p.stop()
		return nil, p.failure(fmt.Errorf("not listening after %v", startTimeout))
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// omniwitnessLogsYAML is the -additional_logs file that configures the
// logs: the schema of omniwitness.ConfigYAML. The Origin is given
// explicitly (omniwitness does not derive it from the key). Quoted
// scalars are YAML double-quoted strings: origins and keys are ASCII.
func omniwitnessLogsYAML(logs []*benchLog) []byte {
	var b strings.Builder
	b.WriteString("Logs:\n")
	for _, l := range logs {
		fmt.Fprintf(&b, "  - Origin: %s\n    PublicKey: %s\n", strconv.Quote(l.origin), strconv.Quote(l.vkey))
	}
	return []byte(b.String())
}

// newOmniwitnessKey makes omniwitness's signing key: an x/mod note Ed25519
// signer key, "PRIVATE+KEY+<name>+<hash>+<base64>", which its
// -private_key_path file holds and formats/note.NewSignerForCosignatureV1
// reads (it signs cosignature/v1 with it).
func newOmniwitnessKey(name string) (string, error) {
	skey, _, err := note.GenerateKey(rand.Reader, name)
	return skey, err
}

// startOmniwitness runs omniwitness on a free port of 127.0.0.1 with a
// sqlite database, key and log list in dir, and returns once it answers
// HTTP. The extra flags come last.
func startOmniwitness(ctx context.Context, bin, dir string, logs []*benchLog, extra []string) (*witnessProcess, error) {
	skey, err := newOmniwitnessKey(omniwitnessName)
	if err != nil {
		return nil, err
	}
	keyPath := filepath.Join(dir, "omniwitness.key")
	if err := os.WriteFile(keyPath, []byte(skey), 0o600); err != nil {
		return nil, err
	}
	logsPath := filepath.Join(dir, "omniwitness-logs.yaml")
	if err := os.WriteFile(logsPath, omniwitnessLogsYAML(logs), 0o600); err != nil {
		return nil, err
	}
	// omniwitness does not say which port it got, so the bench picks one.
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := startProcess("omniwitness", bin, append([]string{
		"--listen", addr,
		"--metrics_listen", "127.0.0.1:0",
		"--db_file", filepath.Join(dir, "omniwitness.db"),
		"--private_key_path", keyPath,
		"--additional_logs", logsPath,
	}, extra...), filepath.Join(dir, "omniwitness.log"), nil)
	if err != nil {
		return nil, err
	}
	p.url = "http://" + addr
	if err := waitHTTP(ctx, p); err != nil {
		p.stop()
		return nil, p.failure(err)
	}
	return p, nil
}

// freePort asks the kernel for a free port of 127.0.0.1.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls p's URL until it gives any HTTP answer, p exits, or
// startTimeout passes.
func waitHTTP(ctx context.Context, p *witnessProcess) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited before answering: %v", p.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("no HTTP answer after " + startTimeout.String())
}
