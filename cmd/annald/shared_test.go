package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel"
)

// console is a browser's session with one annald: its cookie and CSRF
// token.
type console struct {
	cookie *http.Cookie
	csrf   string
}

func signIn(t *testing.T, base, credential string) console {
	t.Helper()
	body, _ := json.Marshal(api.SignInRequest{Credential: credential})
	resp, err := http.Post(base+"/ui/session", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sess api.ConsoleSession
	if err := json.NewDecoder(resp.Body).Decode(&sess); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %d %v", resp.StatusCode, err)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "annal_console" {
			return console{cookie: c, csrf: sess.CSRF}
		}
	}
	t.Fatal("sign-in set no cookie")
	return console{}
}

// do sends a console request with the session's cookie, and its CSRF token
// when withCSRF, and returns the status and the body.
func (c console) do(t *testing.T, method, u string, withCSRF bool) (int, []byte) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("{}")
	}
	req, _ := http.NewRequest(method, u, body)
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(c.cookie)
	if withCSRF {
		req.Header.Set("X-CSRF-Token", c.csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// waitPublished returns once a checkpoint covers every entry c's kernel
// wrote so far.
func waitPublished(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	rc, err := c.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/barrier"})
	if err != nil {
		t.Fatal(err)
	}
	// Until the first checkpoint is in the bucket, there is none to read.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.WaitProof(ctx, rc.Index)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sealedItem returns the history item of the sealed action on target. It
// is asked once: a read right after a takeover, while integration writes
// the partial entry bundle at the integrated size again, waits for it
// (logstore's awaitBundle) rather than fail.
func sealedItem(t *testing.T, c *client.Client, target string) api.HistoryItem {
	t.Helper()
	page, err := c.History(context.Background(), url.Values{"target": {target}})
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("the history of %s: %+v %v", target, page, err)
	}
	return page.Events[0]
}

// A log on shared storage (MariaDB and versitygw) keeps its sealed
// payloads, blobs, agent files and console sessions where every instance
// reaches them (seed 002: any kernel instance handles any request): the
// active kernel seals a payload, stores a blob and a file and signs an
// overseer in, and is killed; the standby, on another data folder holding
// only the copied identity, takes over and opens the payload, serves the
// blob and the file, and keeps the overseer signed in. An erasure there
// holds on the first kernel, restarted; a sign-out there holds everywhere;
// and a public GET of every private object in the bucket shows nothing but
// ciphertext.
func TestSpec002_StatelessKernel_TakeoverOpensSealedServesBlobsKeepsSignIn(t *testing.T) {
	a := servicestest.NewAWS(t)
	dirA := t.TempDir()
	flags := []string{"--lease-ttl", "2s", "--checkpoint-interval", "1s", "--keep-blobs"}
	active := startAWSDaemon(t, dirA, a, append(flags, "--lease-holder", "kernel-a")...)
	cred := active.rootCredential(t)
	root := active.client(t, cred)
	ctx := context.Background()

	const secret = "sealed-plaintext-7f3a"
	if _, err := root.Submit(ctx, api.ActionRequest{Type: "create", Target: "crm/customer-9",
		Payload: json.RawMessage(`{"note":"` + secret + `"}`), Subject: "customer-9"}); err != nil {
		t.Fatal(err)
	}
	blob := []byte("blob-plaintext-51c2: the output of a command")
	blobID, err := root.PutBlob(ctx, blob)
	if err != nil {
		t.Fatal(err)
	}
	trust := 0.8
	agent, err := root.CreateAgent(ctx, api.AgentRequest{Name: "mem", Purpose: "shared files", Energy: 10_000, Trust: &trust,
		Grants: []api.Grant{{Pattern: "workspace/*", Actions: []string{"*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: agent.ID, Budget: 5_000, Grants: []api.Grant{{Pattern: "workspace/*", Actions: []string{"*"}}}}); err != nil {
		t.Fatal(err)
	}
	file := []byte("file-plaintext-9d0e: what the agent remembers")
	uri := "vfs://" + agent.ID + "/mem/semantic/facts.md"
	if _, err := active.client(t, agent.Credential).VFSPut(ctx, uri, file, ""); err != nil {
		t.Fatal(err)
	}
	overseer := signIn(t, active.url, cred)
	// History reads the log's bundles from the bucket: wait until they
	// hold every entry written so far.
	waitPublished(t, root)
	if item := sealedItem(t, root, "crm/customer-9"); !strings.Contains(string(item.SealedPayload), secret) {
		t.Fatalf("the active kernel does not open its own sealed payload: %+v", item)
	}

	// The standby has the identity (shared.key included) and nothing else.
	standby := startAWSDaemon(t, copyIdentity(t, dirA), a, append(flags, "--lease-holder", "kernel-b")...)
	active.kill(t)
	standby.waitActive(t, 60*time.Second)
	rootB := standby.client(t, cred)
	if item := sealedItem(t, rootB, "crm/customer-9"); !strings.Contains(string(item.SealedPayload), secret) || item.Erased {
		t.Fatalf("after the takeover the sealed payload does not open: %+v", item)
	}
	if got, err := rootB.Blob(ctx, blobID); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("after the takeover the blob: %q %v", got, err)
	}
	if got, _, err := standby.client(t, agent.Credential).VFSRead(ctx, uri); err != nil || !bytes.Equal(got, file) {
		t.Fatalf("after the takeover the agent's file: %q %v", got, err)
	}
	if status, body := overseer.do(t, http.MethodGet, standby.url+"/ui/session", false); status != http.StatusOK || !strings.Contains(string(body), overseer.csrf) {
		t.Fatalf("after the takeover the console session: %d %s", status, body)
	}
	// The CSRF rule holds as before: a state change without the token is
	// refused, with it the cookie acts (here: an erasure).
	if status, _ := overseer.do(t, http.MethodPost, standby.url+"/v1/subjects/customer-9/erase", false); status != http.StatusForbidden {
		t.Fatalf("a cookie request without the CSRF token after the takeover: %d", status)
	}
	if status, body := overseer.do(t, http.MethodPost, standby.url+"/v1/subjects/customer-9/erase", true); status != http.StatusOK {
		t.Fatalf("an erasure through the console session on the new kernel: %d %s", status, body)
	}
	waitPublished(t, rootB)
	if item := sealedItem(t, rootB, "crm/customer-9"); !item.Erased || item.SealedPayload != nil {
		t.Fatalf("after the erasure: %+v", item)
	}
	checkBucketShowsOnlyCiphertext(t, a, []string{secret, "customer-9", string(blob), string(file), blobID[len("sha256:"):], cred})
	checkDatabaseShowsNoCredential(t, a, cred, overseer)

	// Signed out on the new kernel; then the first kernel, restarted on
	// its own folder, neither opens the erased payload nor knows the
	// session.
	if status, _ := overseer.do(t, http.MethodDelete, standby.url+"/ui/session", true); status != http.StatusNoContent {
		t.Fatalf("sign out: %d", status)
	}
	standby.stop(t)
	again := startAWSDaemon(t, dirA, a, append(flags, "--lease-holder", "kernel-a2")...)
	if again.standby { // the lease released, it is taken at once
		again.waitActive(t, 60*time.Second)
	}
	waitPublished(t, again.client(t, cred))
	if item := sealedItem(t, again.client(t, cred), "crm/customer-9"); !item.Erased || item.SealedPayload != nil {
		t.Fatalf("the first kernel, restarted after an erasure on the second: %+v", item)
	}
	if got, err := again.client(t, cred).Blob(ctx, blobID); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("the first kernel, restarted, serves the blob: %q %v", got, err)
	}
	if status, _ := overseer.do(t, http.MethodGet, again.url+"/ui/session", false); status != http.StatusUnauthorized {
		t.Fatalf("a session signed out on another instance: %d", status)
	}
}

// checkBucketShowsOnlyCiphertext makes the bucket public-read (as
// DEPLOYING.md allows for the tiles) and reads every private object
// without credentials: none shows any of the plaintexts, nor does any
// object's name.
func checkBucketShowsOnlyCiphertext(t *testing.T, a servicestest.AWS, plaintexts []string) {
	t.Helper()
	ctx := context.Background()
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + a.Bucket + `/*"]}]}`
	if _, err := a.S3().PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(a.Bucket), Policy: aws.String(policy)}); err != nil {
		t.Fatal(err)
	}
	list, err := a.S3().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(a.Bucket), Prefix: aws.String("private/")})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range list.Contents {
		key := aws.ToString(o.Key)
		kinds[strings.Split(key, "/")[1]]++
		resp, err := http.Get(a.Endpoint + "/" + a.Bucket + "/" + key)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a public GET of %s: %d (the bucket is not public-read?)", key, resp.StatusCode)
		}
		for _, p := range plaintexts {
			if strings.Contains(string(body), p) || strings.Contains(key, p) {
				t.Errorf("the public object %s shows %q", key, p)
			}
		}
	}
	// Two blobs (the upload and the agent's file); the sealed payload is
	// gone with its subject's erasure.
	if kinds["blobs"] != 2 || kinds["sealed"] != 0 {
		t.Errorf("private objects by kind: %v, want 2 blobs and no sealed payload after the erasure", kinds)
	}
}

// checkDatabaseShowsNoCredential: the shared tables hold the console
// session sealed, never the credential or the CSRF token in the clear.
func checkDatabaseShowsNoCredential(t *testing.T, a servicestest.AWS, cred string, c console) {
	t.Helper()
	db, err := sql.Open("mysql", a.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT actor, sealed FROM annal_console_sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var actor string
		var sealed []byte
		if err := rows.Scan(&actor, &sealed); err != nil {
			t.Fatal(err)
		}
		n++
		if bytes.Contains(sealed, []byte(cred)) || bytes.Contains(sealed, []byte(c.csrf)) || bytes.Contains(sealed, []byte(c.cookie.Value)) {
			t.Error("a console session row holds a secret in the clear")
		}
	}
	if n != 1 {
		t.Errorf("%d console sessions in the database, want 1", n)
	}
}

// A standby whose data folder lacks the log's shared.key (the identity
// copied as before this store was shared) refuses at start, naming the
// file, rather than wait to fail at its takeover.
func TestStandbyWithoutSharedKeyRefusesAtStart(t *testing.T) {
	a := servicestest.NewAWS(t)
	dirA := t.TempDir()
	startAWSDaemon(t, dirA, a, "--lease-ttl", "2s", "--checkpoint-interval", "1s", "--lease-holder", "kernel-a")
	dirB := copyIdentity(t, dirA)
	if err := os.Remove(filepath.Join(dirB, kernel.SharedKeyFile)); err != nil {
		t.Fatal(err)
	}
	d, err := tryStartDaemon(dirB, "--lease-ttl", "2s", "--lease-holder", "kernel-b")
	if err == nil {
		d.stop(t)
		t.Fatal("a standby without shared.key started")
	}
	if !strings.Contains(err.Error(), "shared.key") || !strings.Contains(err.Error(), "copy it") {
		t.Fatalf("the refusal does not say what to copy: %v", err)
	}
}
