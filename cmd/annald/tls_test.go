package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "annald test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

// TestServeTLSConsoleCookieSecure: with --tls-cert annald serves HTTPS and
// the console's session cookie is Secure; with --secure-cookies behind a
// proxy it is Secure over plain HTTP too.
func TestServeTLSConsoleCookieSecure(t *testing.T) {
	cert, key := selfSigned(t)
	d := startDaemon(t, t.TempDir(), "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(d.url, "https://") {
		t.Fatalf("annald with --tls-cert says it listens on %s", d.url)
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	secureCookie := func(c *http.Client, url, cred string) bool {
		body, _ := json.Marshal(map[string]string{"credential": cred})
		resp, err := c.Post(url+"/ui/session", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
			t.Fatalf("sign in at %s: %d %v", url, resp.StatusCode, resp.Cookies())
		}
		return resp.Cookies()[0].Secure
	}
	if !secureCookie(insecure, d.url, d.rootCredential(t)) {
		t.Error("over HTTPS the console cookie is not Secure")
	}
	plain := startDaemon(t, t.TempDir())
	if secureCookie(http.DefaultClient, plain.url, plain.rootCredential(t)) {
		t.Error("over plain HTTP without --secure-cookies the cookie is Secure (the browser would drop it)")
	}
	proxied := startDaemon(t, t.TempDir(), "--secure-cookies")
	if !secureCookie(http.DefaultClient, proxied.url, proxied.rootCredential(t)) {
		t.Error("--secure-cookies: the cookie is not Secure")
	}
	if _, err := tryStartDaemon(t.TempDir(), "--tls-cert", cert); err == nil {
		t.Error("--tls-cert without --tls-key started")
	}
}
