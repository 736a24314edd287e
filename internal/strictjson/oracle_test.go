package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// This file keeps the first implementation of CheckDepth, which walks the
// input with encoding/json's Decoder.Token, as the oracle of
// FuzzCheckAgreesWithOracle and the baseline of BenchmarkCheck. It is
// test-only and MUST NOT change: the one-pass checker is held to it.

// oracleCheckDepth is CheckDepth as it was before the one-pass scanner.
func oracleCheckDepth(data []byte, maxDepth int) error {
	if !utf8.Valid(data) {
		return errors.New("JSON is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := oracleCheckValue(dec, 0, maxDepth); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("JSON has data after its value")
	}
	return oracleCheckSurrogates(data)
}

func oracleCheckValue(dec *json.Decoder, depth, maxDepth int) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("JSON is malformed: %w", err)
	}
	return oracleCheckToken(dec, tok, depth, maxDepth)
}

func oracleCheckToken(dec *json.Decoder, tok json.Token, depth, maxDepth int) error {
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return fmt.Errorf("JSON nests deeper than %d levels", maxDepth)
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
				if err := oracleCheckValue(dec, depth+1, maxDepth); err != nil {
					return err
				}
			}
		case '[':
			for dec.More() {
				if err := oracleCheckValue(dec, depth+1, maxDepth); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return fmt.Errorf("JSON is malformed: %w", err)
		}
	case json.Number:
		return oracleCheckNumber(string(t))
	}
	return nil
}

// oracleCheckSurrogates refuses a \u escape of a lone UTF-16 surrogate, which
// encoding/json would quietly turn into U+FFFD. data is well-formed JSON, so
// every backslash starts an escape inside a string.
func oracleCheckSurrogates(data []byte) error {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		i++
		if data[i] != 'u' {
			continue
		}
		r := oracleHexRune(data[i+1 : i+5])
		i += 4
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00 && i+6 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' &&
			utf16.DecodeRune(r, oracleHexRune(data[i+3:i+7])) != unicode.ReplacementChar:
			i += 6
		case utf16.IsSurrogate(r):
			return fmt.Errorf("JSON string has a lone UTF-16 surrogate \\u%04x", r)
		}
	}
	return nil
}

func oracleHexRune(h []byte) rune {
	n, _ := strconv.ParseUint(string(h), 16, 16)
	return rune(n)
}

func oracleCheckNumber(s string) error {
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
