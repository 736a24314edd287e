package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// inProcess is the --annald value that runs the kernel inside annal-bench.
const inProcess = "in-process"

// annaldPackage is what buildAnnald builds.
const annaldPackage = "github.com/annal-dev/annal/cmd/annald"

// annaldProcess is `annald serve` as its own process, as it is deployed:
// its own runtime and collector, its own HTTP server and connection limit,
// on a data folder of the bench. The load generator (this process) and
// the server then share the machine's cores as they do with Tessera's
// conformance server, which is also a process of its own.
type annaldProcess struct {
	url, cred string
	childProcess
}

// childProcess is a server the bench started: annald or Tessera's
// conformance server.
type childProcess struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed once it has exited
	logPath string
}

// findAnnald is the annald to measure when --annald is not given: the one
// installed beside annal-bench (go install ./cmd/... puts both in one
// folder, from one source), else one built from the module annal-bench
// runs in (go run), into dir/bin, else the one on PATH.
func findAnnald(ctx context.Context, dir string) (string, error) {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "annald")
		if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	bin := filepath.Join(dir, "bin", "annald")
	out, buildErr := exec.CommandContext(ctx, "go", "build", "-o", bin, annaldPackage).CombinedOutput()
	if buildErr == nil {
		return bin, nil
	}
	if onPath, err := exec.LookPath("annald"); err == nil {
		return onPath, nil
	}
	return "", fmt.Errorf("no annald to measure: none beside annal-bench, none on PATH, and go build %s failed (run annal-bench inside the annal module, give one with --annald, or run the kernel in this process with --annald %s): %v\n%s",
		annaldPackage, inProcess, buildErr, out)
}

// annaldArgs are the serve flags of the bench's kernel: benchConfig's
// settings, as flags.
func annaldArgs(dir string, o options) []string {
	args := []string{"serve", "--data", dir, "--listen", "127.0.0.1:0", "--log-level", "warn",
		// The phases open a connection per client and keep the Go
		// clients' idle ones: more than annald's default allows.
		"--max-connections", "16384",
		"--genesis-energy", strconv.FormatUint(benchGenesis, 10),
		"--batch-size", strconv.FormatUint(uint64(o.batchSize), 10),
		"--batch-age", o.batchAge.String(),
		"--checkpoint-interval", o.checkpointIv.String(),
		"--gc-headroom", strconv.FormatInt(o.gcHeadroom, 10),
	}
	for r := range 4 {
		args = append(args, "--rate-limit", fmt.Sprintf("%d=%d/%d", r, benchRateLimit, benchRateLimit))
	}
	if o.noWriteAhead {
		args = append(args, "--no-write-ahead")
	}
	if o.cpuProfile != "" {
		args = append(args, "--cpuprofile", o.cpuProfile)
	}
	return args
}

// startAnnald runs bin serve on a fresh data folder dir and waits until it
// listens; it answers with its URL and root credential.
func startAnnald(ctx context.Context, bin, dir string, o options) (*annaldProcess, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	logPath := dir + ".log"
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, annaldArgs(dir, o)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &annaldProcess{childProcess: childProcess{cmd: cmd, done: make(chan struct{}), logPath: logPath}}
	started := make(chan error, 1)
	go func() {
		started <- p.readBanner(stdout)
		io.Copy(io.Discard, stdout) // the pipe must not fill
		cmd.Wait()
		close(p.done)
	}()
	select {
	case err := <-started:
		if err != nil {
			p.stop()
			return nil, err
		}
		return p, nil
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		p.stop()
		return nil, fmt.Errorf("annald did not listen within a minute: see %s", logPath)
	}
}

// readBanner reads what serve prints on start until it has the URL and
// the root credential.
func (p *annaldProcess) readBanner(stdout io.Reader) error {
	sc := bufio.NewScanner(stdout)
	credPath := ""
	for sc.Scan() {
		line := sc.Text()
		if u, ok := strings.CutPrefix(line, "annald: listening on "); ok {
			p.url = u
		}
		if c, ok := strings.CutPrefix(line, "annald: root credential in "); ok {
			credPath = c
		}
		if p.url != "" && credPath != "" {
			raw, err := os.ReadFile(credPath)
			if err != nil {
				return err
			}
			p.cred = strings.TrimSpace(string(raw))
			return nil
		}
	}
	time.Sleep(100 * time.Millisecond) // its last words reach the log
	return fmt.Errorf("annald exited before it listened: %s", logTail(p.logPath))
}

// logTail is the end of a server's log, for an error that says why it
// stopped.
func logTail(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "see " + path
	}
	const most = 2048
	if len(raw) > most {
		raw = raw[len(raw)-most:]
	}
	return fmt.Sprintf("%s (in %s)", strings.TrimSpace(string(raw)), path)
}

// cpu is the CPU time (user and system) the process has used so far.
func (p *childProcess) cpu() (time.Duration, error) {
	return processCPUOf(p.cmd.Process.Pid)
}

// stop ends the process as an operator would (SIGINT), killing it if it
// has not stopped in 10 s; an exit other than a clean one is an error.
func (p *childProcess) stop() error {
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within 10 s of SIGINT: see %s", p.cmd.Path, p.logPath)
	}
	if !p.cmd.ProcessState.Success() {
		return fmt.Errorf("%s stopped with %v: see %s", p.cmd.Path, p.cmd.ProcessState, p.logPath)
	}
	return nil
}

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times: 100
// on every architecture Go supports.
const clockTicks = 100

// processCPUOf is the CPU time (user and system) process pid has used,
// from /proc/<pid>/stat (Linux).
func processCPUOf(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields counted from its end.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	fields := strings.Fields(string(raw[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the name", len(fields))
	}
	// utime and stime are fields 14 and 15 of the line: 12 and 13 after
	// the name, counting the state as the first.
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat: utime %q, stime %q", fields[11], fields[12])
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}
