package server

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel"
)

// RFC 9110 §15.6.4 (503, with Retry-After §10.2.3): a write the log's
// fence refused — another kernel holds the write lease, and the database
// rolled the batch back — is answered 503 with Retry-After, retryable and
// not outcome_unknown: nothing was written, and the client may send it
// again (to the kernel that holds the lease).
func TestRFC9110_15_6_4_FenceRefusalIsRetryableNotOutcomeUnknown(t *testing.T) {
	a := servicestest.NewAWS(t)
	ctx := context.Background()
	storage := &kernel.AWSStorage{DSN: a.DSN, Bucket: a.Bucket, Endpoint: a.Endpoint, AccessKey: a.AccessKey, SecretKey: a.SecretKey}
	lease, err := kernel.OpenLease(ctx, storage, "kernel-a", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	if err := lease.Acquire(ctx, nil); err != nil {
		t.Fatal(err)
	}
	storage.Lease = lease
	ts := newTestServer(t, func(c *kernel.Config) {
		c.CheckpointInterval = kernel.MinAWSCheckpointInterval
		c.Storage = kernel.Storage{AWS: storage}
	})
	action := api.ActionRequest{Type: "mutate", Target: "workspace/x"}
	// Published before the fence: Close then has no checkpoint left to
	// wait for, where it waited up to two intervals of 1 s of its 3 s (and
	// past them on a loaded machine).
	var first api.Receipt
	if err := json.Unmarshal(ts.call(t, "POST", "/v1/actions?wait=published", ts.rootCred, action).ok(t).body, &first); err != nil || first.Proof == "" {
		t.Fatalf("the first action's receipt has no proof (%v): %+v", err, first)
	}

	db, err := sql.Open("mysql", a.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE AnnalLease SET holder = 'kernel-b' WHERE id = 0"); err != nil {
		t.Fatal(err)
	}
	r := ts.call(t, "POST", "/v1/actions", ts.rootCred, action).must(t, http.StatusServiceUnavailable)
	if r.header.Get("Retry-After") == "" || r.err.OutcomeUnknown || !r.err.Retryable {
		t.Fatalf("the fence's refusal: %v (Retry-After %q)", r, r.header.Get("Retry-After"))
	}
}
