package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxJSONDepth bounds the nesting of objects and arrays in a caller's JSON.
const MaxJSONDepth = 32

// CheckJSON checks that data is one JSON value that RFC 8785 can canonicalise
// without changing its meaning, and refuses what encoding/json would quietly
// accept or alter:
//   - invalid UTF-8 (encoding/json would replace it with U+FFFD),
//   - an object with two members of the same name (encoding/json keeps the last),
//   - a number that is not exactly an IEEE 754 double, such as 2^53+1
//     (RFC 8785 §3.2.2.3 would round it),
//   - nesting deeper than MaxJSONDepth, and trailing data.
func CheckJSON(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("JSON is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := checkValue(dec, 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("JSON has data after its value")
	}
	return nil
}

func checkValue(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("JSON is malformed: %w", err)
	}
	return checkToken(dec, tok, depth)
}

func checkToken(dec *json.Decoder, tok json.Token, depth int) error {
	switch t := tok.(type) {
	case json.Delim:
		if depth >= MaxJSONDepth {
			return fmt.Errorf("JSON nests deeper than %d levels", MaxJSONDepth)
		}
		switch t {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return fmt.Errorf("JSON is malformed: %w", err)
				}
				name := k.(string)
				if seen[name] {
					return fmt.Errorf("JSON object has the member %q twice", name)
				}
				seen[name] = true
				if err := checkValue(dec, depth+1); err != nil {
					return err
				}
			}
		case '[':
			for dec.More() {
				if err := checkValue(dec, depth+1); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return fmt.Errorf("JSON is malformed: %w", err)
		}
	case json.Number:
		return checkNumber(string(t))
	}
	return nil
}

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
	if new(big.Rat).SetFloat64(f).Cmp(exact) != 0 {
		return fmt.Errorf("JSON number %s is not exactly representable as an IEEE 754 double (RFC 8785); send it as a string", s)
	}
	return nil
}
