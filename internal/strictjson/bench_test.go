package strictjson

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkCheck compares CheckDepth with oracleCheckDepth, the
// Decoder.Token walk it replaced, on what the kernel checks most: a small
// action payload, a log entry as replay reads it, and a large payload.
func BenchmarkCheck(b *testing.B) {
	inputs := []struct {
		name  string
		data  []byte
		depth int
	}{
		{"payload-small", []byte(`{"content_oid":"sha256:` + strings.Repeat("9ee620803bf22ef0", 4) + `"}`), MaxDepth},
		{"entry", benchEntry(b, "agent.killed"), MaxDepth + 2},
		{"payload-60KB", benchPayload(60 << 10), MaxDepth},
	}
	checkers := []struct {
		name  string
		check func([]byte, int) error
	}{
		{"oracle", oracleCheckDepth},
		{"check", CheckDepth},
	}
	for _, in := range inputs {
		for _, c := range checkers {
			if err := c.check(in.data, in.depth); err != nil {
				b.Fatalf("%s refuses %s: %v", c.name, in.name, err)
			}
			b.Run(fmt.Sprintf("%s/%s", in.name, c.name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(in.data)))
				for b.Loop() {
					if err := c.check(in.data, in.depth); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchEntry returns the entry of the event test vector called name.
func benchEntry(b *testing.B, name string) []byte {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testvectors", "events.json"))
	if err != nil {
		b.Fatal(err)
	}
	var vectors struct {
		Vectors []struct{ Name, Entry string }
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		b.Fatal(err)
	}
	for _, v := range vectors.Vectors {
		if v.Name == name {
			return []byte(v.Entry)
		}
	}
	b.Fatalf("no event test vector %q", name)
	return nil
}

// benchPayload returns a payload of at least size bytes, shaped like an
// agent writing files: an array of objects with paths, sizes, text with
// escapes and non-ASCII letters, numbers and literals.
func benchPayload(size int) []byte {
	type file struct {
		Path    string   `json:"path"`
		Size    int      `json:"size"`
		Mode    int      `json:"mode"`
		Ratio   float64  `json:"ratio"`
		Binary  bool     `json:"binary"`
		Owner   *string  `json:"owner"`
		Tags    []string `json:"tags"`
		Content string   `json:"content"`
	}
	line := "func (s *Store) Put(key string, v []byte) error { // écrit la clé \"key\"\n\treturn nil\n}\n"
	var files []file
	for n := 0; ; n++ {
		files = append(files, file{
			Path:    fmt.Sprintf("workspace/src/pkg%d/file%d.go", n%7, n),
			Size:    1000 + 37*n,
			Mode:    420,
			Ratio:   0.25 * float64(n%8),
			Tags:    []string{"go", "generated"},
			Content: strings.Repeat(line, 8),
		})
		data, err := json.Marshal(map[string]any{"files": files})
		if err != nil {
			panic(err)
		}
		if len(data) >= size {
			return data
		}
	}
}
