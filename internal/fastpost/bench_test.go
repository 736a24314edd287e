package fastpost

import (
	"bufio"
	"io"
	"net/http"
	"testing"
)

// BenchmarkParseHead parses the head an agent's client sends for an
// action: a few headers besides Host and Content-Length.
func BenchmarkParseHead(b *testing.B) {
	in := []byte(headSeeds[1])
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, ok := parseHead(in, &plainConfig); !ok {
			b.Fatal("head refused")
		}
	}
}

// BenchmarkAppendAnswer writes the answer a handler gives to an action: a
// JSON receipt with its content type set.
func BenchmarkAppendAnswer(b *testing.B) {
	body := []byte(`{"seq":12345,"oid":"sha256:9ee620803bf22ef09ee620803bf22ef09ee620803bf22ef09ee620803bf22ef0"}`)
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		w := &writer{header: make(http.Header, 4)}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusCreated)
		w.Write(body)
		out, _ = w.appendAnswer(out[:0])
	}
}

// BenchmarkServe sends requests one after the other on one kept
// connection over loopback and reads each answer: the fast path's whole
// round trip, system calls included.
func BenchmarkServe(b *testing.B) {
	s := startFast(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, r.Body)
	}), nil)
	c := dial(b, s.addr)
	br := bufio.NewReader(c)
	req := []byte(post(`{"type":"observe","target":"workspace/a"}`))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			b.Fatal(err)
		}
		r.Body.Close()
	}
}
