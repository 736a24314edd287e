package witness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/annal-dev/annal/internal/strictjson"
)

// AdminSocketName is the Unix socket in a data folder on which a running
// witness serves its admin API (see the package comment, "Log
// configuration").
const AdminSocketName = "admin.sock"

// maxAdminBody bounds an admin request: one LogConfig or PeerConfig.
const maxAdminBody = MaxKeysPerLog*(8<<10) + 2*MaxLineLength + 1024

// AdminHandler serves the log and peer configuration of store, and its
// evidence:
//
//	GET    /logs                          list (JSON []LogStatus)
//	POST   /logs                          add (JSON LogConfig)
//	DELETE /logs?origin=O[&forget=true]   remove
//	GET    /peers                         list (JSON []PeerConfig)
//	POST   /peers                         add (JSON PeerConfig)
//	DELETE /peers?name=N                  remove
//	GET    /evidence                      list (JSON []EvidenceRecord)
//	GET    /evidence/{id}                 one evidence file
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
		if err := readStrict(rw, r, &cfg); err != nil {
			writeError(rw, http.StatusBadRequest, fmt.Errorf("%w: %v", ErrInvalidLogConfig, err))
			return
		}
		writeAdminResult(rw, store.AddLog(cfg))
	})
	mux.HandleFunc("DELETE /logs", func(rw http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		writeAdminResult(rw, store.RemoveLog(q.Get("origin"), q.Get("forget") == "true"))
	})
	mux.HandleFunc("GET /peers", func(rw http.ResponseWriter, r *http.Request) {
		peers, err := store.Peers()
		if err != nil {
			writeError(rw, http.StatusInternalServerError, err)
			return
		}
		writeJSON(rw, peers)
	})
	mux.HandleFunc("POST /peers", func(rw http.ResponseWriter, r *http.Request) {
		var p PeerConfig
		if err := readStrict(rw, r, &p); err != nil {
			writeError(rw, http.StatusBadRequest, fmt.Errorf("%w: %v", ErrInvalidPeerConfig, err))
			return
		}
		writeAdminResult(rw, store.AddPeer(p))
	})
	mux.HandleFunc("DELETE /peers", func(rw http.ResponseWriter, r *http.Request) {
		writeAdminResult(rw, store.RemovePeer(r.URL.Query().Get("name")))
	})
	mux.HandleFunc("GET /evidence", func(rw http.ResponseWriter, r *http.Request) {
		list, err := store.Evidence()
		if err != nil {
			writeError(rw, http.StatusInternalServerError, err)
			return
		}
		writeJSON(rw, list)
	})
	mux.HandleFunc("GET /evidence/{id}", func(rw http.ResponseWriter, r *http.Request) {
		file, err := store.EvidenceFile(r.PathValue("id"))
		if err != nil {
			writeAdminResult(rw, err)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.Write(file)
	})
	return mux
}

func writeAdminResult(rw http.ResponseWriter, err error) {
	switch {
	case err == nil:
		rw.WriteHeader(http.StatusNoContent)
	case errors.Is(err, fs.ErrNotExist):
		writeError(rw, http.StatusNotFound, err)
	case errors.Is(err, ErrLogExists), errors.Is(err, ErrPeerExists):
		writeError(rw, http.StatusConflict, err)
	case errors.Is(err, ErrInvalidLogConfig), errors.Is(err, ErrInvalidPeerConfig):
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

// AdminClient changes the log and peer configuration of a running witness,
// and reads its evidence, through its admin socket. Its errors wrap the same
// sentinels as Store's.
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
	_, err = c.do(http.MethodPost, "/logs", strings.NewReader(string(body)), logErrors)
	return err
}

// RemoveLog stops serving a log (Store.RemoveLog).
func (c *AdminClient) RemoveLog(origin string, forgetState bool) error {
	q := url.Values{"origin": {origin}}
	if forgetState {
		q.Set("forget", "true")
	}
	_, err := c.do(http.MethodDelete, "/logs?"+q.Encode(), nil, logErrors)
	return err
}

// Logs lists the configured logs (Store.Logs).
func (c *AdminClient) Logs() ([]LogStatus, error) {
	body, err := c.do(http.MethodGet, "/logs", nil, logErrors)
	if err != nil {
		return nil, err
	}
	var logs []LogStatus
	if err := json.Unmarshal(body, &logs); err != nil {
		return nil, fmt.Errorf("admin socket: list of logs: %w", err)
	}
	return logs, nil
}

// AddPeer configures a new peer (Store.AddPeer).
func (c *AdminClient) AddPeer(p PeerConfig) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = c.do(http.MethodPost, "/peers", strings.NewReader(string(body)), peerErrors)
	return err
}

// RemovePeer stops gossiping with a peer (Store.RemovePeer).
func (c *AdminClient) RemovePeer(name string) error {
	_, err := c.do(http.MethodDelete, "/peers?"+url.Values{"name": {name}}.Encode(), nil, peerErrors)
	return err
}

// Peers lists the configured peers (Store.Peers).
func (c *AdminClient) Peers() ([]PeerConfig, error) {
	body, err := c.do(http.MethodGet, "/peers", nil, peerErrors)
	if err != nil {
		return nil, err
	}
	var peers []PeerConfig
	if err := json.Unmarshal(body, &peers); err != nil {
		return nil, fmt.Errorf("admin socket: list of peers: %w", err)
	}
	return peers, nil
}

// Evidence lists the stored evidence (Store.Evidence).
func (c *AdminClient) Evidence() ([]EvidenceRecord, error) {
	body, err := c.do(http.MethodGet, "/evidence", nil, evidenceErrors)
	if err != nil {
		return nil, err
	}
	var list []EvidenceRecord
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("admin socket: list of evidence: %w", err)
	}
	return list, nil
}

// EvidenceFile returns one evidence file (Store.EvidenceFile).
func (c *AdminClient) EvidenceFile(id string) ([]byte, error) {
	return c.do(http.MethodGet, "/evidence/"+url.PathEscape(id), nil, evidenceErrors)
}

// adminErrors are the sentinels the answers of one admin resource stand
// for: 404, 409 and 400.
type adminErrors struct{ notFound, exists, invalid error }

var (
	logErrors      = adminErrors{ErrUnknownLog, ErrLogExists, ErrInvalidLogConfig}
	peerErrors     = adminErrors{ErrUnknownPeer, ErrPeerExists, ErrInvalidPeerConfig}
	evidenceErrors = adminErrors{ErrUnknownEvidence, nil, nil}
)

func (c *AdminClient) do(method, path string, body io.Reader, sentinels adminErrors) ([]byte, error) {
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
		return nil, &adminError{msg, sentinels.notFound}
	case http.StatusConflict:
		if sentinels.exists != nil {
			return nil, &adminError{msg, sentinels.exists}
		}
	case http.StatusBadRequest:
		if sentinels.invalid != nil {
			return nil, &adminError{msg, sentinels.invalid}
		}
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

// readStrict reads an admin request body of at most maxAdminBody bytes
// with exact member names (internal/strictjson): encoding/json would take
// "Origin" or "ſtate" for a field it is not.
func readStrict(rw http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxAdminBody))
	if err != nil {
		return err
	}
	return strictjson.Decode(body, v)
}
