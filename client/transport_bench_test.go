package client

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/annal-dev/annal/api"
)

// cannedKernel answers every request on its connections at once with the
// same receipt, as annald frames it: what the client costs on its own.
func cannedKernel(b *testing.B) string {
	b.Helper()
	body := `{"status":"committed","event_id":"0193c2a4-5b6e-7f80-9a1b-2c3d4e5f6a7b","index":12345,"leaf_hash":"6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b","cost":15,"energy_left":4294967281,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}` + "\n"
	answer := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sat, 28 Nov 2026 12:00:00 GMT\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	return rawServer(b, func(nc net.Conn, _ int, _ *http.Request) bool {
		_, err := io.WriteString(nc, answer)
		return err == nil
	})
}

// BenchmarkSubmit is one sequential agent's Submit against a kernel that
// answers at once, through the default transport and through net/http's
// Transport (the client's transport before callerTransport).
func BenchmarkSubmit(b *testing.B) {
	u := cannedKernel(b)
	req := api.ActionRequest{Type: "observe", Target: "workspace/seq"}
	for _, tc := range []struct {
		name   string
		client func() *Client
	}{
		{"default", func() *Client { c, _ := New(u, "credential"); return c }},
		{"net-http-transport", func() *Client {
			c, _ := New(u, "credential")
			return c.WithHTTPClient(&http.Client{Transport: sharedTransport.fallback, Timeout: DefaultTimeout})
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := tc.client()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Submit(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
