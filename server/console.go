package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
)

// The overseer console: static files embedded in the binary, served at
// /ui/, that talk to the same /v1 API as every client. A person signs in
// with a credential; the server keeps it in memory (or, for a log on
// shared storage, sealed in the database: console_shared.go) under a
// random session id sent back as an httpOnly, SameSite=Strict cookie
// (Secure over TLS), and from then on authenticate accepts that cookie in
// place of a bearer credential. So the console is bound to exactly the rules of the API:
// what the credential may see and do, nothing more. A request that changes
// state and authenticates by cookie must also carry the session's CSRF
// token in X-CSRF-Token (and, where the browser says, come from the same
// origin); a cross-site page can neither send the cookie (SameSite) nor
// read the token.

//go:embed ui
var consoleFiles embed.FS

const (
	consoleCookie = "annal_console"
	csrfHeader    = "X-CSRF-Token"
	// consoleSessionTTL is how long a console session lives after sign-in.
	consoleSessionTTL = 8 * time.Hour
	// maxConsoleSessions bounds the sessions kept in memory; the oldest is
	// dropped to make room. maxSessionsPerActor bounds one actor's, so that
	// no actor signing in again and again pushes out another's session.
	maxConsoleSessions  = 4096
	maxSessionsPerActor = 16
)

// consoleCSP forbids inline script and any script or style not served by
// annald, framing, plugins and form posts elsewhere, and requires Trusted
// Types for every DOM sink that parses HTML: the console builds its pages
// with createElement and textContent only, so a string an agent wrote
// cannot become markup even if a bug passed it to innerHTML (the browser
// throws instead).
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

type consoleSession struct {
	actor      string
	credential string
	csrf       string
	expires    time.Time
}

// consoleSessions starts, finds and ends the console's sessions, kept by
// a sessionStore: in memory (memorySessions), or for a log on shared
// storage in its database (sharedSessions, console_shared.go).
type consoleSessions struct {
	store sessionStore
	now   func() time.Time
}

// sessionStore keeps sessions by cookie, each store with the same limits:
// at most maxSessionsPerActor per actor and maxConsoleSessions in all, the
// oldest ended first, expired ones never found.
type sessionStore interface {
	open(cookie string, sess *consoleSession, now time.Time) error
	// get returns the live session of a cookie, nil if it has none, or an
	// error when the store cannot be asked.
	get(cookie string, now time.Time) (*consoleSession, error)
	close(cookie string) error
}

func newConsoleSessions() *consoleSessions {
	return &consoleSessions{store: &memorySessions{byID: map[[sha256.Size]byte]*consoleSession{}}, now: time.Now}
}

func randomToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// open starts a session of actor for credential and returns its cookie
// value. The actor's oldest session ends if it has maxSessionsPerActor.
func (c *consoleSessions) open(actor, credential string) (cookie string, sess *consoleSession, err error) {
	cookie, err = randomToken()
	if err != nil {
		return "", nil, err
	}
	csrf, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	now := c.now()
	sess = &consoleSession{actor: actor, credential: credential, csrf: csrf, expires: now.Add(consoleSessionTTL)}
	return cookie, sess, c.store.open(cookie, sess, now)
}

// get returns the live session of a cookie value, nil if it has none, or
// an error when its store cannot be asked.
func (c *consoleSessions) get(cookie string) (*consoleSession, error) {
	return c.store.get(cookie, c.now())
}

// close ends a cookie's session (on every instance, with shared storage).
func (c *consoleSessions) close(cookie string) error { return c.store.close(cookie) }

// memorySessions maps the SHA-256 of a session cookie to its session. Only
// the hash is kept as the key, so that a memory dump or a timing of the map
// lookup gives no usable cookie.
type memorySessions struct {
	mu   sync.Mutex
	byID map[[sha256.Size]byte]*consoleSession
}

func (m *memorySessions) open(cookie string, sess *consoleSession, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evict(now, func(s *consoleSession) bool { return s.actor == sess.actor }, maxSessionsPerActor)
	m.evict(now, func(*consoleSession) bool { return true }, maxConsoleSessions)
	m.byID[sha256.Sum256([]byte(cookie))] = sess
	return nil
}

// evict drops expired sessions and, while more than limit-1 of those that
// match remain, the oldest of them. The caller holds m.mu.
func (m *memorySessions) evict(now time.Time, match func(*consoleSession) bool, limit int) {
	for {
		var oldestKey [sha256.Size]byte
		var oldest *consoleSession
		n := 0
		for k, s := range m.byID {
			if now.After(s.expires) {
				delete(m.byID, k)
				continue
			}
			if !match(s) {
				continue
			}
			n++
			if oldest == nil || s.expires.Before(oldest.expires) {
				oldest, oldestKey = s, k
			}
		}
		if n < limit {
			return
		}
		delete(m.byID, oldestKey)
	}
}

func (m *memorySessions) get(cookie string, now time.Time) (*consoleSession, error) {
	key := sha256.Sum256([]byte(cookie))
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byID[key]
	if ok && now.After(s.expires) {
		delete(m.byID, key)
		return nil, nil
	}
	return s, nil
}

func (m *memorySessions) close(cookie string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byID, sha256.Sum256([]byte(cookie)))
	return nil
}

// safeMethod reports whether an HTTP method changes nothing.
func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// sameOrigin refuses a request the browser says came from another site.
// Sec-Fetch-Site is sent by every current browser; its absence (curl, an
// old browser) leaves the CSRF token as the guard.
func sameOrigin(r *http.Request) error {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
		return nil
	default:
		return fmt.Errorf("%w: a console request from a %s page", kernel.ErrForbidden, site)
	}
}

// cookieSession returns the console session a request's cookie names, if it
// has one, after the CSRF checks its method needs.
func (s *Server) cookieSession(r *http.Request) (*consoleSession, string, error) {
	c, err := r.Cookie(consoleCookie)
	if err != nil || c.Value == "" {
		return nil, "", nil
	}
	sess, err := s.console.get(c.Value)
	if err != nil {
		return nil, "", fmt.Errorf("%w: the console's sessions cannot be read: %v", kernel.ErrUnavailable, err)
	}
	if sess == nil {
		return nil, "", fmt.Errorf("%w: the console session has ended; sign in again", kernel.ErrUnauthenticated)
	}
	if !safeMethod(r.Method) {
		if err := sameOrigin(r); err != nil {
			return nil, "", err
		}
		token := r.Header.Get(csrfHeader)
		if subtle.ConstantTimeCompare([]byte(token), []byte(sess.csrf)) != 1 {
			return nil, "", fmt.Errorf("%w: a console request that changes state must carry the session's %s", kernel.ErrForbidden, csrfHeader)
		}
	}
	return sess, c.Value, nil
}

func (s *Server) setConsoleCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: consoleCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil || s.secureCookies, SameSite: http.SameSiteStrictMode,
	})
}

// SecureCookies marks the console's session cookie Secure on every
// answer, for a server behind a proxy that terminates TLS (over TLS served
// here the cookie is Secure anyway).
func (s *Server) SecureCookies() { s.secureCookies = true }

// consoleRoutes are /ui/ (the embedded console) and its session API.
func (s *Server) consoleRoutes() []route {
	files, err := fs.Sub(consoleFiles, "ui")
	if err != nil {
		panic(err) // the embed directive guarantees the folder
	}
	static := http.StripPrefix("/ui/", http.FileServerFS(files))
	page := func(w http.ResponseWriter, r *http.Request) {
		consoleHeaders(w)
		name := strings.TrimPrefix(r.URL.Path, "/ui/")
		if name == "" {
			name = "index.html"
		}
		if f, err := files.Open(name); err != nil {
			http.Error(w, "no such page in the console", http.StatusNotFound)
			return
		} else {
			f.Close()
		}
		if ct := mime.TypeByExtension(name[strings.LastIndexByte(name, '.'):]); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		static.ServeHTTP(w, r)
	}
	return []route{
		{"GET /{$}", serve(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) }, 0)},
		{"GET /ui", serve(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) }, 0)},
		{"GET /ui/", serve(page, 0)},
		{"POST /ui/session", serve(s.handleSignIn, 0)},
		{"GET /ui/session", serve(s.handleSession, 0)},
		{"DELETE /ui/session", serve(s.handleSignOut, 0)},
	}
}

func consoleHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// handleSignIn opens a console session for the credential in the body.
func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) {
	consoleHeaders(w)
	if err := sameOrigin(r); err != nil {
		s.fail(w, r, err)
		return
	}
	// A JSON content type cannot be sent cross-origin without a CORS
	// preflight, which annald never answers: no page elsewhere can sign a
	// browser in as someone else.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		s.fail(w, r, fmt.Errorf("%w: sign in with Content-Type: application/json", kernel.ErrInvalid))
		return
	}
	var req api.SignInRequest
	if err := readJSON(w, r, api.MaxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	actor, err := s.k.Authenticate(strings.TrimSpace(req.Credential))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cookie, sess, err := s.console.open(actor.ID, strings.TrimSpace(req.Credential))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.setConsoleCookie(w, r, cookie, int(consoleSessionTTL/time.Second))
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, api.ConsoleSession{Actor: actorOut(actor), CSRF: sess.csrf, Expires: sess.expires.UTC().Format(time.RFC3339)})
}

// handleSession answers who the cookie's session belongs to, and its CSRF
// token (readable by same-origin script only).
func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	consoleHeaders(w)
	w.Header().Set("Cache-Control", "no-store")
	sess, _, err := s.cookieSession(r)
	if err == nil && sess == nil {
		err = fmt.Errorf("%w: not signed in", kernel.ErrUnauthenticated)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	actor, err := s.k.Authenticate(sess.credential)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ConsoleSession{Actor: actorOut(actor), CSRF: sess.csrf, Expires: sess.expires.UTC().Format(time.RFC3339)})
}

func (s *Server) handleSignOut(w http.ResponseWriter, r *http.Request) {
	consoleHeaders(w)
	sess, cookie, err := s.cookieSession(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if sess != nil {
		if err := s.console.close(cookie); err != nil {
			s.fail(w, r, fmt.Errorf("%w: the session could not be ended: %v", kernel.ErrUnavailable, err))
			return
		}
	}
	s.setConsoleCookie(w, r, "", -1)
	w.WriteHeader(http.StatusNoContent)
}
