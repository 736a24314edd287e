package servicestest

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// MariaDB is a server of one test's own, for tests that stop and start it
// (the shared one of .ci/services must stay up for the others).
type MariaDB struct {
	dir  string
	port int
	cmd  *exec.Cmd
	// ServerDSN names the server as a user who may create databases.
	ServerDSN string
}

// StartMariaDB installs a database folder and starts a server on a free
// port of 127.0.0.1, stopped with t. It needs Debian's mariadb-server-core.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	if _, err := exec.LookPath("mariadbd"); err != nil {
		if os.Getenv("ANNAL_REQUIRE_SERVICES") != "" {
			t.Fatal("mariadbd is not installed: .ci/services install")
		}
		t.Skip("mariadbd is not installed: .ci/services install")
	}
	m := &MariaDB{dir: t.TempDir()}
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(m.dir, "data"), "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Getuid() == 0 {
		args = append(args, "--user=root")
	}
	if out, err := exec.Command("mariadb-install-db", args...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m.port = FreePort(t)
	m.Start(t)
	t.Cleanup(func() { m.Stop(t) })
	root, err := sql.Open("mysql", "root@unix("+filepath.Join(m.dir, "mysqld.sock")+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, q := range []string{"CREATE USER 'annal'@'127.0.0.1' IDENTIFIED BY 'annal-test'", "GRANT ALL ON *.* TO 'annal'@'127.0.0.1' WITH GRANT OPTION"} {
		if _, err := root.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	m.ServerDSN = fmt.Sprintf("annal:annal-test@tcp(127.0.0.1:%d)/", m.port)
	return m
}

// Start starts the server (again), on the same port and data, and waits
// until it answers.
func (m *MariaDB) Start(t testing.TB) {
	t.Helper()
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(m.dir, "data"), "--socket=" + filepath.Join(m.dir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(m.dir, "mysqld.pid"), fmt.Sprintf("--port=%d", m.port), "--bind-address=127.0.0.1",
		"--skip-networking=0", "--log-error=" + filepath.Join(m.dir, "error.log"), "--innodb-buffer-pool-size=64M",
		"--skip-log-bin", "--skip-name-resolve"}
	if os.Getuid() == 0 {
		args = append(args, "--user=root")
	}
	m.cmd = exec.Command("mariadbd", args...)
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if Listening(fmt.Sprintf("127.0.0.1:%d", m.port), 60*time.Second) {
		return
	}
	log, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
	t.Fatalf("mariadbd did not start:\n%s", log)
}

// Stop stops the server cleanly (SIGTERM) and waits for it.
func (m *MariaDB) Stop(t testing.TB) {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		m.cmd.Process.Kill()
		<-done
	}
	m.cmd = nil
}
