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
	access, secret := S3Keys()
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+access, "ROOT_SECRET_KEY="+secret)
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

// S3Keys are the test S3 server's root keys: ANNAL_TEST_S3_ACCESS_KEY and
// ANNAL_TEST_S3_SECRET_KEY, or .ci/services' own when they are not set, so
// that a server a test starts itself (StartS3) takes the keys its clients
// use, in a plain go test as under .ci/test.
func S3Keys() (access, secret string) {
	access, secret = os.Getenv("ANNAL_TEST_S3_ACCESS_KEY"), os.Getenv("ANNAL_TEST_S3_SECRET_KEY")
	if access == "" || secret == "" {
		return "annaltest", "annal-test-secret"
	}
	return access, secret
}
