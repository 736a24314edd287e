package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
)

// TestRetry: 429, 503 and a 409 marked retryable are sent again with
// backoff; a 503 whose write may have landed or from a kernel stopped until
// an operator acts, and every other refusal, are not.
func TestRetry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      int // answers before success
		status    int
		body      string
		wantSends int32
		wantErr   bool
	}{
		{"429 twice", 2, http.StatusTooManyRequests, `{"error":"rate limited","gate":"rate_limit"}`, 3, false},
		{"503 busy", 1, http.StatusServiceUnavailable, `{"error":"append: the log is busy, retry"}`, 2, false},
		{"503 outcome unknown", 1, http.StatusServiceUnavailable, `{"error":"append: log append failed","outcome_unknown":true}`, 1, true},
		{"503 stopped until an operator acts", 1, http.StatusServiceUnavailable, `{"error":"the kernel has stopped taking writes until an operator acts","stopped":true}`, 1, true},
		{"409 retryable", 2, http.StatusConflict, `{"error":"decided on a state that changed","retryable":true}`, 3, false},
		{"409 conflict", 1, http.StatusConflict, `{"error":"hold answered already"}`, 1, true},
		{"403 denied", 1, http.StatusForbidden, `{"error":"denied"}`, 1, true},
		{"429 forever", 100, http.StatusTooManyRequests, `{"error":"rate limited"}`, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sends atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := sends.Add(1)
				if int(n) <= tc.fail {
					if tc.status == http.StatusTooManyRequests {
						w.Header().Set("Retry-After", "0")
					}
					w.WriteHeader(tc.status)
					w.Write([]byte(tc.body))
					return
				}
				w.Write([]byte(`{"status":"committed","index":7}`))
			}))
			defer srv.Close()
			c, err := New(srv.URL, "cred")
			if err != nil {
				t.Fatal(err)
			}
			var notified int
			c.WithRetry(RetryPolicy{Attempts: 4, First: time.Millisecond, Max: 10 * time.Millisecond,
				Notify: func(*Error, int, time.Duration) { notified++ }})
			rc, err := c.Submit(context.Background(), api.ActionRequest{Type: "mutate", Target: "workspace/x"})
			if got := sends.Load(); got != tc.wantSends {
				t.Errorf("sent %d times, want %d", got, tc.wantSends)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && rc.Index != 7 {
				t.Errorf("receipt %+v", rc)
			}
			if notified != int(tc.wantSends)-1 {
				t.Errorf("notified %d times for %d sends", notified, tc.wantSends)
			}
		})
	}
	// The zero policy never retries.
	var sends atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sends.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "cred")
	if _, err := c.Info(context.Background()); err == nil || sends.Load() != 1 {
		t.Errorf("zero policy: err %v after %d sends", err, sends.Load())
	}
}
