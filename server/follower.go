package server

import (
	"errors"
	"net/http"

	"github.com/annal-dev/annal/kernel"
)

// UnknownCredential reports whether r presents a credential — a bearer
// credential, or the console's session cookie — that this server's kernel
// does not know. A follower (kernel.OpenFollower) sends such a request to
// the lease holder rather than answer 401: the credential may have been
// issued since the follower last folded the log, or the console session
// signed in at another kernel. A request without a credential is not
// unknown.
func (s *Server) UnknownCredential(r *http.Request) bool {
	if r.Header.Get("Authorization") == "" {
		if c, err := r.Cookie(consoleCookie); err != nil || c.Value == "" {
			return false
		}
	}
	_, err := s.lookupCredential(r, s.k.Identify)
	return errors.Is(err, kernel.ErrUnauthenticated)
}
