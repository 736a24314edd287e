package loadconn

import (
	"bufio"
	"bytes"
	"testing"
)

// benchAnswer reads the same answer over and over into one reused buffer,
// as a Conn does on a kept connection: the parser's own cost and
// allocations, without a socket.
func benchAnswer(b *testing.B, in string) {
	data := []byte(in)
	r := bytes.NewReader(data)
	br := bufio.NewReader(r)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r.Reset(data)
		br.Reset(r)
		_, body, _, err := readAnswer(br, buf[:0])
		if err != nil {
			b.Fatal(err)
		}
		buf = body
	}
}

func BenchmarkReadAnswerLength(b *testing.B) {
	benchAnswer(b, "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 60\r\n\r\n{\"id\":\"e-1\",\"seq\":12345,\"verdict\":\"allowed\",\"reason\":\"ok..\"}")
}

func BenchmarkReadAnswerChunked(b *testing.B) {
	benchAnswer(b, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\n\r\n")
}
