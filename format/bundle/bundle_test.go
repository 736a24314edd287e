package bundle_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/annal-dev/annal/format/bundle"
)

// The header, its parts and the trailer declare their members in RFC 8785
// order (member names here are ASCII, so UTF-16 order is byte order): the
// struct reads as the line it encodes to.
func TestMembersInCanonicalOrder(t *testing.T) {
	for _, v := range []any{bundle.Header{}, bundle.Consistency{}, bundle.Selection{}, bundle.Trailer{}} {
		typ := reflect.TypeOf(v)
		var names []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			names = append(names, name)
		}
		if !slices.IsSorted(names) {
			t.Errorf("%s declares its members as %v, not in RFC 8785 order", typ, names)
		}
	}
}

func ExampleAppendRangeLine() {
	line := bundle.AppendRangeLine(nil, 7, []byte(`{"v":1}`), nil)
	fmt.Printf("%s", line)
	// Output: {"entry":"eyJ2IjoxfQ==","index":7}
}

func ExampleAppendInclusionLine() {
	proof := [][32]byte{{1}, {2}}
	line := bundle.AppendInclusionLine(nil, 7, []byte(`{"v":1}`), nil, proof)
	fmt.Printf("%s", line)
	// Output: {"entry":"eyJ2IjoxfQ==","index":7,"proof":["AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]}
}
