package strictjson

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// generatedDocs is how many documents TestCheckAgreesWithOracle_Generated
// builds.
var generatedDocs = 3000

// TestCheckAgreesWithOracle_Generated holds CheckDepth to the oracle on
// documents built from JSON's grammar, where the fuzzer rarely goes: many
// members whose names are alike after unescaping, surrogates, numbers at
// the edges of the fast path, nesting about the bound; each also with one
// byte changed, dropped or added.
func TestCheckAgreesWithOracle_Generated(t *testing.T) {
	rng := rand.New(rand.NewPCG(8259, 8785))
	for range generatedDocs {
		var b strings.Builder
		genValue(rng, &b, 0)
		doc := []byte(b.String())
		variants := [][]byte{doc}
		if len(doc) > 0 {
			at := rng.IntN(len(doc))
			variants = append(variants,
				append(append(append([]byte(nil), doc[:at]...), genByte(rng)), doc[at+1:]...),
				append(append([]byte(nil), doc[:at]...), doc[at+1:]...),
				append(append(append([]byte(nil), doc[:at]...), genByte(rng)), doc[at:]...),
			)
		}
		for _, data := range variants {
			for _, depth := range []int{MaxDepth, 3} {
				got, want := CheckDepth(data, depth), oracleCheckDepth(data, depth)
				if refusal(got) != refusal(want) {
					t.Fatalf("CheckDepth(%q, %d) = %v, the oracle says %v", data, depth, got, want)
				}
			}
		}
	}
}

var (
	genNames = []string{`a`, `\u0061`, `\u0041`, `A`, `b`, `ab`, `a\u0062`, `\ud800`, `\udc00`, `\ufffd`, `�`,
		`\ud83d\ude00`, `😀`, `\/`, `/`, `\\`, `\n`, `\u000a`, ``, `é`, `\u00e9`, `\"`, `\u0022`}
	genStrings = append(genNames, `\ud800\u0041`, `\ud800x`, `\\ud800`, `\uDBFF\uDFFF`, "\t", "\x7f", `\x`, `\u12`)
	genNumbers = []string{`0`, `-0`, `1`, `-1`, `0.5`, `0.1`, `1e2`, `1E+2`, `100e-2`, `1e400`, `1e-400`, `1e401`,
		`123456789012345`, `1234567890123456`, `9007199254740993`, `9007199254740992`, `0.123456789012345`,
		`0.1234567890123456`, `18446744073709551616`, `18446744073709552000`, `1.7976931348623157e308`,
		`5e-324`, `1e-324`, `01`, `1.`, `-`, `.5`, `1e`, `999999999999999.9`, `99999999999999.9`}
	genBytes = []byte(" \t\r\n\v{}[]:,\"\\-+.0123456789eEtrufalsn\x00\x1f\x7f\xff\xc3\xef")
)

func genByte(rng *rand.Rand) byte { return genBytes[rng.IntN(len(genBytes))] }

func genValue(rng *rand.Rand, b *strings.Builder, depth int) {
	ws := func() {
		if rng.IntN(4) == 0 {
			b.WriteString([]string{" ", "\t", "\r\n", "  "}[rng.IntN(4)])
		}
	}
	ws()
	k := rng.IntN(10)
	if depth > 40 {
		k = 9
	}
	switch {
	case k < 2:
		b.WriteByte('{')
		n := rng.IntN(4)
		if rng.IntN(8) == 0 {
			n = 15 + rng.IntN(6)
		}
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			b.WriteString(`"` + genNames[rng.IntN(len(genNames))])
			if n > 4 || rng.IntN(3) == 0 {
				b.WriteString(string(rune('a' + i)))
			}
			b.WriteString(`"`)
			ws()
			b.WriteByte(':')
			genValue(rng, b, depth+1)
		}
		ws()
		b.WriteByte('}')
	case k < 4:
		b.WriteByte('[')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			genValue(rng, b, depth+1)
		}
		ws()
		b.WriteByte(']')
	case k < 6:
		b.WriteString(`"` + genStrings[rng.IntN(len(genStrings))] + `"`)
	case k < 8:
		b.WriteString(genNumbers[rng.IntN(len(genNumbers))])
	default:
		b.WriteString([]string{"true", "false", "null"}[rng.IntN(3)])
	}
	ws()
}
