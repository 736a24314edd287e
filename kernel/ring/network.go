package ring

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// MaxDestinationLen bounds a network destination: a 253-byte host name, a
// colon and a five-digit port, with room for IPv6 brackets.
const MaxDestinationLen = 270

// Destination is a network destination an action declares: a host and an
// optional port.
type Destination struct {
	// Host is a lower-case DNS name, a dotted-quad IPv4 address or an IPv6
	// address in its canonical form (without brackets).
	Host string
	// Port is the port, or 0 when none was given.
	Port uint16
	// IP reports whether Host is an IP address literal.
	IP bool
}

// String writes d back as host or host:port, with brackets around IPv6.
func (d Destination) String() string {
	h := d.Host
	if d.IP && strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if d.Port == 0 {
		return h
	}
	return h + ":" + strconv.Itoa(int(d.Port))
}

// ParseDestination parses a network destination of the form host or
// host:port, where host is a DNS name, a dotted-quad IPv4 address or a
// bracketed IPv6 address ("[2001:db8::1]:443"). It is strict, so that what
// is matched against an allowlist is what a client would connect to:
//   - no scheme, user information, path, query or whitespace
//     ("https://x", "user@x", "x/y", "x y" are refused);
//   - DNS names are ASCII letters, digits and hyphens in dot-separated labels
//     of 1 to 63 bytes, not starting or ending with a hyphen, at most 253
//     bytes, without a trailing dot; other scripts must be given in
//     punycode, so look-alike letters cannot pass for ASCII ones;
//   - a name whose last label is all digits must be a canonical dotted quad:
//     "127.1", "0x7f.0.0.1" and "2130706433" are refused, since C resolvers
//     read them as 127.0.0.1;
//   - IPv6 must be bracketed and carry no zone;
//   - the port is decimal in 1..65535 without a leading zero.
//
// Names are compared in lower case.
func ParseDestination(s string) (Destination, error) {
	bad := func(rule string) (Destination, error) {
		return Destination{}, fmt.Errorf("network destination %s: %w: %s", quote(s), ErrInvalidValue, rule)
	}
	if s == "" {
		return bad("must not be empty")
	}
	if len(s) > MaxDestinationLen {
		return bad(fmt.Sprintf("longer than %d bytes", MaxDestinationLen))
	}
	var d Destination
	var port string
	var err error
	if strings.HasPrefix(s, "[") {
		d, port, err = parseIPv6Destination(s)
	} else {
		d, port, err = parseNamedDestination(s)
	}
	if err == nil && port != "" {
		d.Port, err = parsePort(port)
	}
	if err != nil {
		return bad(err.Error())
	}
	return d, nil
}

var errNoPort = errors.New("a ':' must be followed by a port")

// parseIPv6Destination reads "[address]" or "[address]:port" and returns
// the port unparsed.
func parseIPv6Destination(s string) (d Destination, port string, err error) {
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return d, "", errors.New("an IPv6 address opened with '[' must be closed with ']'")
	}
	host, rest := s[1:end], s[end+1:]
	if rest != "" {
		if rest[0] != ':' {
			return d, "", errors.New("only ':port' may follow a bracketed IPv6 address")
		}
		if port = rest[1:]; port == "" {
			return d, "", errNoPort
		}
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is6() || a.Zone() != "" {
		return d, "", errors.New("brackets must hold an IPv6 address without a zone")
	}
	return Destination{Host: a.String(), IP: true}, port, nil
}

// parseNamedDestination reads "host" or "host:port", the host a DNS name
// or a dotted quad, and returns the port unparsed.
func parseNamedDestination(s string) (d Destination, port string, err error) {
	host, port, hasPort := strings.Cut(s, ":")
	if hasPort && port == "" {
		return d, "", errNoPort
	}
	d.Host, d.IP, err = parseHost(host)
	return d, port, err
}

// parseHost checks a DNS name or dotted quad and returns it in lower case.
func parseHost(h string) (string, bool, error) {
	if h == "" {
		return "", false, fmt.Errorf("the host must not be empty")
	}
	if len(h) > 253 {
		return "", false, fmt.Errorf("a host name is at most 253 bytes")
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return "", false, err
		}
	}
	if allDigits(labels[len(labels)-1]) {
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is4() || a.String() != h {
			return "", false, fmt.Errorf("a host ending in a numeric label must be a dotted-quad IPv4 address")
		}
		return h, true, nil
	}
	return strings.ToLower(h), false, nil
}

// checkLabel checks one label of a host name: 1 to 63 ASCII letters,
// digits and hyphens, not starting or ending with a hyphen.
func checkLabel(l string) error {
	if l == "" {
		return fmt.Errorf("a host name has no empty label (no leading, trailing or doubled dot)")
	}
	if len(l) > 63 {
		return fmt.Errorf("a host name label is at most 63 bytes")
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("a host is ASCII letters, digits, '-' and '.' only (byte %q; no scheme, user, path, whitespace or non-ASCII)", c)
		}
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("a host name label does not start or end with '-'")
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func parsePort(p string) (uint16, error) {
	if !allDigits(p) || p[0] == '0' || len(p) > 5 {
		return 0, fmt.Errorf("a port is a decimal number in 1..65535 without a leading zero")
	}
	n, _ := strconv.Atoi(p)
	if n > 65535 {
		return 0, fmt.Errorf("a port is a decimal number in 1..65535 without a leading zero")
	}
	return uint16(n), nil
}

// allowEntry is a parsed allowlist entry: an exact host, or a wildcard
// "*.suffix" that matches names strictly below suffix; and an optional port.
type allowEntry struct {
	host     string // for a wildcard, the suffix without "*."
	wildcard bool
	port     uint16
}

// ParseAllowEntry checks one network allowlist entry. An entry is a
// destination as ParseDestination reads it ("api.example.com",
// "api.example.com:443", "10.0.0.1", "[2001:db8::1]:443"), or "*." followed
// by a DNS name and an optional port ("*.example.com", "*.example.com:443").
// A wildcard matches every name with at least one more label in front of
// the suffix ("a.example.com", "a.b.example.com"), never the suffix itself
// ("example.com"), a name that merely contains it ("example.com.evil.net")
// or a name that merely ends with its letters ("evilexample.com"), and
// never an IP address. An entry without a port matches every port.
func ParseAllowEntry(s string) error {
	_, err := parseAllowEntry(s)
	return err
}

func parseAllowEntry(s string) (allowEntry, error) {
	rest, wildcard := strings.CutPrefix(s, "*.")
	d, err := ParseDestination(rest)
	if err != nil {
		return allowEntry{}, fmt.Errorf("network allowlist entry %s: %w", quote(s), err)
	}
	if wildcard && d.IP {
		return allowEntry{}, fmt.Errorf("network allowlist entry %s: %w: a wildcard stands for DNS labels, not part of an IP address", quote(s), ErrInvalidValue)
	}
	return allowEntry{host: d.Host, wildcard: wildcard, port: d.Port}, nil
}

func (e allowEntry) match(d Destination) bool {
	if e.port != 0 && e.port != d.Port {
		return false
	}
	if !e.wildcard {
		return e.host == d.Host
	}
	return !d.IP && len(d.Host) > len(e.host)+1 && strings.HasSuffix(d.Host, "."+e.host)
}

// MatchAllowlist reports whether d matches one of the allowlist entries
// (see ParseAllowEntry). Host names compare case-insensitively. An entry
// that does not parse matches nothing (fail closed); ParseAllowEntry
// reports such entries. An empty allowlist matches nothing.
func MatchAllowlist(allowlist []string, d Destination) bool {
	for _, s := range allowlist {
		if e, err := parseAllowEntry(s); err == nil && e.match(d) {
			return true
		}
	}
	return false
}
