package servicestest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// HAProxy is a load balancer (Debian's haproxy, installed by .ci/services
// install-apt) in front of kernels: round robin, each kernel checked on
// GET /v1/readyz every 300 ms (two failures take it out, one success puts
// it back), a request whose connection to a kernel could not be made sent
// to another (retries 3, redispatch): nothing was sent, so nothing is
// done twice. Each answer names the kernel that gave it (Annal-Served-By).
// It listens on 127.0.0.1 only.
type HAProxy struct {
	URL string
	cmd *exec.Cmd
	log *strings.Builder
}

// HAProxyConfig is the configuration of a balancer at listen (host:port)
// over backends (host:port each): what DEPLOYING.md shows.
func HAProxyConfig(listen string, backends []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
	maxconn 4096
defaults
	mode http
	timeout connect 1s
	timeout client 60s
	timeout server 60s
	retries 3
	option redispatch 1
frontend annal
	bind %s
	default_backend kernels
backend kernels
	balance roundrobin
	option httpchk GET /v1/readyz
	http-check expect status 200
	default-server inter 300ms fall 2 rise 1
	http-response set-header Annal-Served-By %%[srv_name]
`, listen)
	for i, addr := range backends {
		fmt.Fprintf(&b, "\tserver kernel%d %s check\n", i, addr)
	}
	return b.String()
}

// ErrNoHAProxy: haproxy is not installed.
var ErrNoHAProxy = errors.New("haproxy is not installed: .ci/services install-apt")

// StartHAProxy starts haproxy over backends on a free port of 127.0.0.1,
// its configuration in dir; Stop ends it.
func StartHAProxy(dir string, backends []string) (*HAProxy, error) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/haproxy"); serr != nil {
			return nil, ErrNoHAProxy
		}
		bin = "/usr/sbin/haproxy"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(HAProxyConfig(addr, backends)), 0o644); err != nil {
		return nil, err
	}
	h := &HAProxy{URL: "http://" + addr, log: &strings.Builder{}}
	h.cmd = exec.Command(bin, "-f", cfg, "-db") // -db: in the foreground
	h.cmd.Stdout, h.cmd.Stderr = h.log, h.log
	if err := h.cmd.Start(); err != nil {
		return nil, err
	}
	if !Listening(addr, 10*time.Second) {
		h.Stop()
		return nil, fmt.Errorf("haproxy did not listen on %s: %s", addr, h.log)
	}
	return h, nil
}

// Stop ends haproxy.
func (h *HAProxy) Stop() {
	if h.cmd.Process != nil {
		h.cmd.Process.Kill()
		h.cmd.Wait()
	}
}

// NewHAProxy is StartHAProxy for a test, stopped with it. Without haproxy
// the test skips, or fails under ANNAL_REQUIRE_SERVICES.
func NewHAProxy(t testing.TB, backends []string) *HAProxy {
	t.Helper()
	h, err := StartHAProxy(t.TempDir(), backends)
	if errors.Is(err, ErrNoHAProxy) && os.Getenv("ANNAL_REQUIRE_SERVICES") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h
}
