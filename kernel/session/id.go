package session

// MaxIDLength is the longest agent or session identifier (§17.1).
const MaxIDLength = 256

// validID reports whether s matches ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$
// and is at most MaxIDLength bytes (§17.1). The kernel validates identifiers
// before they get here; this copy keeps the package fail-closed on its own.
func validID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum {
			continue
		}
		if i == 0 || i == len(s)-1 {
			return false
		}
		if c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}
