package servicestest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// S3Server is a versitygw of one test's own, for tests that stop and
// start it.
type S3Server struct {
	dir      string
	port     int
	cmd      *exec.Cmd
	Endpoint string
}

// StartS3 starts versitygw (installed by .ci/services) on a free port of
// 127.0.0.1 with its data in a temporary folder, stopped with t.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	bin, err := exec.LookPath("versitygw")
	if err != nil {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			home, _ := os.UserHomeDir()
			gopath = filepath.Join(home, "go")
		}
		bin = filepath.Join(gopath, "bin", "versitygw")
		if _, err := os.Stat(bin); err != nil {
			if os.Getenv("ANNAL_REQUIRE_SERVICES") != "" {
				t.Fatal("versitygw is not installed: .ci/services install")
			}
			t.Skip("versitygw is not installed: .ci/services install")
		}
	}
	s := &S3Server{dir: t.TempDir()}
	os.MkdirAll(filepath.Join(s.dir, "data"), 0o700)
	s.port = FreePort(t)
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", s.port)
	s.start(t, bin)
	t.Cleanup(func() { s.Stop(t) })
	return s
}

func (s *S3Server) start(t testing.TB, bin string) {
	t.Helper()
	s.cmd = exec.Command(bin, "--port", fmt.Sprintf("127.0.0.1:%d", s.port), "--quiet", "posix", filepath.Join(s.dir, "data"))
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+os.Getenv("ANNAL_TEST_S3_ACCESS_KEY"), "ROOT_SECRET_KEY="+os.Getenv("ANNAL_TEST_S3_SECRET_KEY"))
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !Listening(fmt.Sprintf("127.0.0.1:%d", s.port), 30*time.Second) {
		t.Fatal("versitygw did not start")
	}
}

// Start starts it again on the same port and data.
func (s *S3Server) Start(t testing.TB) {
	t.Helper()
	s.start(t, s.cmd.Path)
}

// Stop stops it and waits.
func (s *S3Server) Stop(t testing.TB) {
	if s.cmd == nil || s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
}
