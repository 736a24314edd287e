package strictjson

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// options are those of every Decode. Exact names and no duplicates are the
// library's defaults; they are stated here so that no later default can
// change them unseen.
var options = json.JoinOptions(
	json.RejectUnknownMembers(true),
	json.MatchCaseInsensitiveNames(false),
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
)

// Decode checks data with Check and reads it into the value v points to,
// matching member names exactly: see the package comment for what it
// promises. v MUST be a non-nil pointer.
func Decode(data []byte, v any) error {
	dst := reflect.ValueOf(v)
	if dst.Kind() != reflect.Pointer || dst.IsNil() {
		return fmt.Errorf("strictjson: Decode needs a non-nil pointer, not %T", v)
	}
	if err := Check(data); err != nil {
		return err
	}
	// Read into a fresh value, so that a refused input leaves *v alone and
	// an accepted one does not merge into what *v held.
	fresh := reflect.New(dst.Type().Elem())
	if err := json.Unmarshal(data, fresh.Interface(), options); err != nil {
		return describe(err)
	}
	dst.Elem().Set(fresh.Elem())
	return nil
}

// DecodeChecked is Decode for data that has already passed Check (or
// CheckDepth), read straight into v, which MUST point to a zero value: it
// skips Decode's second Check and its fresh copy. On error *v may hold
// part of data. Why: replaying a log parses every entry, and the entry's
// parser checks it first with its own depth bound.
func DecodeChecked(data []byte, v any) error {
	if err := json.Unmarshal(data, v, options); err != nil {
		return describe(err)
	}
	return nil
}

// describe rewrites the library's error about an unknown member so that it
// names the member, where it is, and the field it was perhaps meant for,
// and its other errors about a value that does not fit (semanticError).
func describe(err error) error {
	var se *json.SemanticError
	if !errors.As(err, &se) {
		return err
	}
	if !errors.Is(se.Err, json.ErrUnknownName) {
		return semanticError(se)
	}
	name := se.JSONPointer.LastToken()
	var where string
	if parent := se.JSONPointer.Parent(); parent != "" {
		where = " in " + string(parent)
	}
	for _, field := range fieldNames(se.GoType) {
		if strings.EqualFold(field, name) {
			return fmt.Errorf("JSON member %q%s is not known: member names are case-sensitive, and this one is %q", name, where, field)
		}
	}
	return fmt.Errorf("JSON member %q%s is not known", name, where)
}

// semanticError says in words of its own what the library's error says of
// a JSON value that does not fit its Go type: the library words its
// message differently from one process to the next ("cannot" or "unable
// to"), and what Annal's readers say must not change between runs (the
// known-answer vectors record it).
func semanticError(se *json.SemanticError) error {
	msg := "JSON value"
	if kind, ok := kindNames[se.JSONKind]; ok {
		msg = "JSON " + kind
	}
	if se.JSONPointer != "" {
		msg += " at " + string(se.JSONPointer)
	}
	msg += " does not fit"
	if se.GoType != nil {
		msg += " Go type " + se.GoType.String()
	}
	if se.Err != nil {
		return fmt.Errorf("%s: %w", msg, se.Err)
	}
	return errors.New(msg)
}

// kindNames name the kinds of JSON value.
var kindNames = map[jsontext.Kind]string{'n': "null", 'f': "boolean", 't': "boolean", '"': "string", '0': "number", '{': "object", '[': "array"}

// fieldNames lists the JSON names of struct type t's fields, for error
// messages only.
func fieldNames(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" && f.Tag.Get("json") == "-":
			continue
		case name == "" && f.Anonymous:
			names = append(names, fieldNames(f.Type)...)
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}
