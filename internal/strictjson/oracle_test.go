package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
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

// oracleCheckNumber is the exact check every number passed before the fast
// path existed: the differential test holds the fast path to it.
func oracleCheckNumber(s string) error { return checkNumber(s) }
