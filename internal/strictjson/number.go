package strictjson

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
)

// number reads the number that starts at data[i] and checks it: see
// checkNumber.
func (c *checker) number(i int) (int, error) {
	data := c.data
	start := i
	if data[i] == '-' {
		i++
	}
	intEnd := i
	switch {
	case i < len(data) && data[i] == '0':
		intEnd = i + 1
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		intEnd = c.digits(i)
	default:
		return 0, c.malformed(i, "in a number")
	}
	integerDigits := intEnd - i
	i, fractionDigits, err := c.fraction(intEnd)
	if err != nil {
		return 0, err
	}
	i, exponent, err := c.exponent(i)
	if err != nil {
		return 0, err
	}
	// The fast path. A decimal of at most 15 significant digits is always
	// accepted by checkNumber when no exponent takes it out of the normal
	// range of doubles (here it lies in [1e-15, 1e15) or is zero): as
	// 10^15 < 2^52, two such decimals never round to the same double, so
	// the shortest decimal that reads back as the double nearest this one,
	// which RFC 8785 writes, is this very value. Counting leading and
	// trailing zeros as digits errs on the slow side.
	if !exponent && integerDigits+fractionDigits <= 15 {
		return i, nil
	}
	return i, checkNumber(string(data[start:i]))
}

// fraction reads the fraction of a number, '.' and digits, if one starts
// at data[i]; it returns the index after it (i without one) and how many
// digits it has.
func (c *checker) fraction(i int) (end, digits int, err error) {
	if i >= len(c.data) || c.data[i] != '.' {
		return i, 0, nil
	}
	end = c.digits(i + 1)
	if end == i+1 {
		return 0, 0, c.malformed(end, "in a number (a digit must follow '.')")
	}
	return end, end - (i + 1), nil
}

// exponent reads the exponent of a number, 'e' or 'E', a sign and digits,
// if one starts at data[i]; it returns the index after it (i without one)
// and whether there is one.
func (c *checker) exponent(i int) (end int, present bool, err error) {
	if i >= len(c.data) || (c.data[i] != 'e' && c.data[i] != 'E') {
		return i, false, nil
	}
	i++
	if i < len(c.data) && (c.data[i] == '+' || c.data[i] == '-') {
		i++
	}
	end = c.digits(i)
	if end == i {
		return 0, true, c.malformed(end, "in a number (an exponent needs a digit)")
	}
	return end, true, nil
}

// digits returns the index of the first byte at or after i that is not a
// decimal digit.
func (c *checker) digits(i int) int {
	for i < len(c.data) && isDigit(c.data[i]) {
		i++
	}
	return i
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// checkNumber checks the literal s of a JSON number: it is at most 128
// characters long, its exponent is within ±400, and it is exactly the value
// of the number RFC 8785 writes for the double it reads as.
func checkNumber(s string) error {
	// Bound the literal before big.Rat sees it: 1e-999999999 would make it
	// build a number of a billion digits.
	if len(s) > 128 {
		return fmt.Errorf("JSON number %.20s... is longer than 128 characters", s)
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+")); err != nil || e > 400 || e < -400 {
			return fmt.Errorf("JSON number %s has an exponent outside ±400", s)
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("JSON number %s is out of range for an IEEE 754 double", s)
	}
	exact, ok := new(big.Rat).SetString(s)
	if !ok {
		return fmt.Errorf("JSON number %s is malformed", s)
	}
	// RFC 8785 writes a number as the shortest decimal that reads back as
	// the same double. The number is accepted when that decimal is the very
	// value sent: 0.1 and 1e2 (written 100) are, 2^53+1 (written
	// 9007199254740992) and 18446744073709551616 (written
	// 18446744073709552000) are not, since the log would carry another value
	// than the one sent.
	canonical, err := jcs.NumberToJSON(f)
	if err != nil {
		return fmt.Errorf("JSON number %s: %v", s, err)
	}
	if short, ok := new(big.Rat).SetString(canonical); !ok || short.Cmp(exact) != 0 {
		return fmt.Errorf("JSON number %s would be written %s in canonical JSON (RFC 8785), another value; send it as a string", s, canonical)
	}
	return nil
}
