package witness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// AdminSocketName is the Unix socket in a data folder on which a running
// witness serves its admin API (see the package comment, "Log
// configuration").
const AdminSocketName = "admin.sock"

// maxAdminBody bounds an admin request: one LogConfig.
const maxAdminBody = MaxKeysPerLog*(8<<10) + 2*MaxLineLength + 1024

// AdminHandler serves the log configuration of store:
//
//	GET    /logs                          list (JSON []LogStatus)
//	POST   /logs                          add (JSON LogConfig)
//	DELETE /logs?origin=O[&forget=true]   remove
//
// It does no authentication: serve it only where the operating system
// restricts who can connect, as ListenAdmin does.
func AdminHandler(store *Store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /logs", func(rw http.ResponseWriter, r *http.Request) {
		logs, err := store.Logs()
		if err != nil {
			writeError(rw, http.StatusInternalServerError, err)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(logs)
	})
	mux.HandleFunc("POST /logs", func(rw http.ResponseWriter, r *http.Request) {
		var cfg LogConfig
		dec := json.NewDecoder(http.MaxBytesReader(rw, r.Body, maxAdminBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			writeError(rw, http.StatusBadRequest, fmt.Errorf("%w: %v", ErrInvalidLogConfig, err))
			return
		}
		writeAdminResult(rw, store.AddLog(cfg))
	})
	mux.HandleFunc("DELETE /logs", func(rw http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		writeAdminResult(rw, store.RemoveLog(q.Get("origin"), q.Get("forget") == "true"))
	})
	return mux
}

func writeAdminResult(rw http.ResponseWriter, err error) {
	switch {
	case err == nil:
		rw.WriteHeader(http.StatusNoContent)
	case errors.Is(err, ErrUnknownLog):
		writeError(rw, http.StatusNotFound, err)
	case errors.Is(err, ErrLogExists):
		writeError(rw, http.StatusConflict, err)
	case errors.Is(err, ErrInvalidLogConfig):
		writeError(rw, http.StatusBadRequest, err)
	default:
		writeError(rw, http.StatusInternalServerError, err)
	}
}

// ListenAdmin listens on the Unix socket at path, replacing a stale socket
// file, and makes it mode 0600 so that only the witness's own account can
// connect (Linux requires write permission on a socket to connect). The
// caller MUST hold the data folder's Store, so that no other witness is
// using the socket being replaced.
func ListenAdmin(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale admin socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return l, nil
}

// AdminClient changes the log configuration of a running witness through
// its admin socket. Its errors wrap the same sentinels as Store's.
type AdminClient struct {
	http *http.Client
}

// NewAdminClient returns a client for the admin socket at path.
func NewAdminClient(path string) *AdminClient {
	return &AdminClient{http: &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
		},
	}}
}

// AddLog configures a new log (Store.AddLog).
func (c *AdminClient) AddLog(cfg LogConfig) error {
	body, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	_, err = c.do(http.MethodPost, "/logs", strings.NewReader(string(body)))
	return err
}

// RemoveLog stops serving a log (Store.RemoveLog).
func (c *AdminClient) RemoveLog(origin string, forgetState bool) error {
	q := url.Values{"origin": {origin}}
	if forgetState {
		q.Set("forget", "true")
	}
	_, err := c.do(http.MethodDelete, "/logs?"+q.Encode(), nil)
	return err
}

// Logs lists the configured logs (Store.Logs).
func (c *AdminClient) Logs() ([]LogStatus, error) {
	body, err := c.do(http.MethodGet, "/logs", nil)
	if err != nil {
		return nil, err
	}
	var logs []LogStatus
	if err := json.Unmarshal(body, &logs); err != nil {
		return nil, fmt.Errorf("admin socket: list of logs: %w", err)
	}
	return logs, nil
}

func (c *AdminClient) do(method, path string, body io.Reader) ([]byte, error) {
	req, err := http.NewRequest(method, "http://witness-admin"+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	msg := strings.TrimSpace(string(answer))
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNoContent:
		return answer, nil
	case http.StatusNotFound:
		return nil, &adminError{msg, ErrUnknownLog}
	case http.StatusConflict:
		return nil, &adminError{msg, ErrLogExists}
	case http.StatusBadRequest:
		return nil, &adminError{msg, ErrInvalidLogConfig}
	}
	return nil, fmt.Errorf("admin socket: %s: %s", resp.Status, msg)
}

// adminError is the witness's own message for a refusal, matching the
// sentinel the Store returned with errors.Is.
type adminError struct {
	msg      string
	sentinel error
}

func (e *adminError) Error() string { return e.msg }
func (e *adminError) Unwrap() error { return e.sentinel }
