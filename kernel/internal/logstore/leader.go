package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Leaders is where each kernel of a shared log can be reached: a table
// beside the write lease in which every kernel advertises its URL under
// its lease holder name, so that a follower knows where to send the
// writes it cannot decide (the lease holder's URL). A kernel advertises
// at start, before it holds the lease, so that the others know its URL
// as soon as it takes the lease.
//
// The table is its own, not a column of the lease's: the lease row is
// written every TTL/3 under the fence's lock, and a URL changes once per
// start.
type Leaders struct {
	db *sql.DB
}

// leaderSchema creates the table of advertised URLs.
const leaderSchema = `CREATE TABLE IF NOT EXISTS AnnalLeader (
	holder VARCHAR(128) NOT NULL PRIMARY KEY,
	url VARCHAR(2048) NOT NULL,
	since DATETIME(6) NOT NULL
)`

// maxAdvertisedURL bounds an advertised URL (the column's width).
const maxAdvertisedURL = 2048

// OpenLeaders opens the table of advertised URLs of the log in a's
// database, creating it (and the lease's, which it reads) if need be.
func OpenLeaders(ctx context.Context, a *AWSStorage) (*Leaders, error) {
	db, err := sql.Open("mysql", a.DSN)
	if err != nil {
		return nil, fmt.Errorf("leaders database: %w", err)
	}
	db.SetMaxOpenConns(2)
	for _, q := range []string{leaderSchema, leaseSchema} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("leaders table: %w", err)
		}
	}
	return &Leaders{db: db}, nil
}

// CheckAdvertiseURL refuses a URL another kernel could not send requests
// to: it must be absolute http(s), with a host, and no path, query or
// fragment (requests keep their own).
func CheckAdvertiseURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("advertised URL %q: %w", raw, err)
	case len(raw) > maxAdvertisedURL:
		return fmt.Errorf("advertised URL: longer than %d bytes", maxAdvertisedURL)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return fmt.Errorf("advertised URL %q: an http:// or https:// URL with a host", raw)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.User != nil:
		return fmt.Errorf("advertised URL %q: scheme, host and port only", raw)
	}
	return nil
}

// Advertise records that holder is reached at url.
func (l *Leaders) Advertise(ctx context.Context, holder, url string) error {
	if !holderName.MatchString(holder) {
		return fmt.Errorf("lease holder %q: 1 to 128 of A-Z a-z 0-9 . _ -", holder)
	}
	if err := CheckAdvertiseURL(url); err != nil {
		return err
	}
	_, err := l.db.ExecContext(ctx, `REPLACE INTO AnnalLeader (holder, url, since) VALUES (?, ?, NOW(6))`, holder, url)
	return err
}

// Leader is the lease's holder as the database has it now, and the URL it
// advertised ("" if none).
type Leader struct {
	Holder    string
	URL       string
	ExpiresIn time.Duration // negative once the lease expired
}

// Live reports whether a kernel holds an unexpired lease and can be
// reached: where a write goes.
func (l Leader) Live() bool { return l.Holder != "" && l.URL != "" && l.ExpiresIn > 0 }

// ErrNoLease is returned by Current before any kernel took the lease.
var ErrNoLease = errors.New("no kernel has taken the write lease yet")

// Current reads the lease's holder and its advertised URL in one query
// (the lease row's clock is the database's).
func (l *Leaders) Current(ctx context.Context) (Leader, error) {
	var ld Leader
	var u sql.NullString
	var micros int64
	err := l.db.QueryRowContext(ctx, `SELECT l.holder, a.url, TIMESTAMPDIFF(MICROSECOND, NOW(6), l.expires_at)
		FROM AnnalLease l LEFT JOIN AnnalLeader a ON a.holder = l.holder WHERE l.id = 0`).Scan(&ld.Holder, &u, &micros)
	if errors.Is(err, sql.ErrNoRows) {
		return Leader{}, ErrNoLease
	}
	if err != nil {
		return Leader{}, fmt.Errorf("read the lease holder: %w", err)
	}
	ld.URL, ld.ExpiresIn = u.String, time.Duration(micros)*time.Microsecond
	return ld, nil
}

// Close releases the database.
func (l *Leaders) Close() error { return l.db.Close() }
