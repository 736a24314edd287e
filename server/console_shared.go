package server

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/annal-dev/annal/internal/sharedstore"
)

// sharedSessions keeps the console's sessions of a log on shared storage
// in its database, so that a restart, a takeover or another instance
// behind a load balancer keeps an overseer signed in, and a sign-out ends
// the session on every instance:
//
//	annal_console_sessions (id, actor, sealed, expires)
//
// id is the SHA-256 of the cookie (the cookie itself is nowhere but in the
// browser); sealed is the credential and the CSRF token, encrypted under
// a key derived from the KEK with id as additional data, so that the
// database never holds a credential in the clear and a row cannot be
// moved to another id. The cookie and CSRF rules are the in-memory
// sessions' (console.go), as are the limits: at most maxSessionsPerActor
// per actor and maxConsoleSessions in all, the oldest ended first.
type sharedSessions struct{ s *sharedstore.Store }

// sessionSecrets is what a session's sealed column holds.
type sessionSecrets struct {
	Credential string `json:"credential"`
	CSRF       string `json:"csrf"`
}

func sessionContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

func (c *sharedSessions) open(cookie string, sess *consoleSession, now time.Time) error {
	ctx, cancel := sessionContext()
	defer cancel()
	id := sha256.Sum256([]byte(cookie))
	plain, err := json.Marshal(sessionSecrets{Credential: sess.credential, CSRF: sess.csrf})
	if err != nil {
		return err
	}
	db := c.s.DB
	if _, err := db.ExecContext(ctx, "DELETE FROM annal_console_sessions WHERE expires < ?", now.UnixNano()); err != nil {
		return fmt.Errorf("end the expired console sessions: %w", err)
	}
	// Make room: the actor's oldest beyond its limit-1, then the oldest
	// of all beyond theirs. MariaDB takes no LIMIT in a subquery of IN:
	// the ids are read first.
	if err := c.evict(ctx, "WHERE actor = ?", maxSessionsPerActor-1, sess.actor); err != nil {
		return err
	}
	if err := c.evict(ctx, "", maxConsoleSessions-1); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "INSERT INTO annal_console_sessions (id, actor, sealed, expires) VALUES (?, ?, ?, ?)",
		id[:], sess.actor, c.s.SealSession(id[:], plain), sess.expires.UnixNano())
	if err != nil {
		return fmt.Errorf("store the console session: %w", err)
	}
	return nil
}

// evict ends the oldest sessions that where selects beyond the newest
// keep.
func (c *sharedSessions) evict(ctx context.Context, where string, keep int, args ...any) error {
	rows, err := c.s.DB.QueryContext(ctx, "SELECT id FROM annal_console_sessions "+where+
		fmt.Sprintf(" ORDER BY expires DESC LIMIT 1000000 OFFSET %d", keep), args...)
	if err != nil {
		return fmt.Errorf("count the console sessions: %w", err)
	}
	var ids [][]byte
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := c.s.DB.ExecContext(ctx, "DELETE FROM annal_console_sessions WHERE id = ?", id); err != nil {
			return fmt.Errorf("end an old console session: %w", err)
		}
	}
	return nil
}

func (c *sharedSessions) get(cookie string, now time.Time) (*consoleSession, error) {
	ctx, cancel := sessionContext()
	defer cancel()
	id := sha256.Sum256([]byte(cookie))
	var actor string
	var sealed []byte
	var expires int64
	err := c.s.DB.QueryRowContext(ctx, "SELECT actor, sealed, expires FROM annal_console_sessions WHERE id = ?", id[:]).Scan(&actor, &sealed, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if now.UnixNano() > expires {
		c.s.DB.ExecContext(ctx, "DELETE FROM annal_console_sessions WHERE id = ?", id[:])
		return nil, nil
	}
	plain, err := c.s.OpenSession(id[:], sealed)
	var secrets sessionSecrets
	if err == nil {
		err = json.Unmarshal(plain, &secrets)
	}
	if err != nil {
		return nil, fmt.Errorf("a console session does not open under the shared key: %w", err)
	}
	return &consoleSession{actor: actor, credential: secrets.Credential, csrf: secrets.CSRF, expires: time.Unix(0, expires)}, nil
}

func (c *sharedSessions) close(cookie string) error {
	ctx, cancel := sessionContext()
	defer cancel()
	id := sha256.Sum256([]byte(cookie))
	_, err := c.s.DB.ExecContext(ctx, "DELETE FROM annal_console_sessions WHERE id = ?", id[:])
	return err
}
