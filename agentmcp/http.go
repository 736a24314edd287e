package agentmcp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/annal-dev/annal/client"
)

// MaxRequestBody bounds one MCP request over HTTP.
const MaxRequestBody = 1 << 20

// HTTPHandler serves the kernel as an MCP server over streamable HTTP, for
// annald's /mcp. Each request authenticates with its own bearer credential
// and gets a server acting with it, so no request can act as another's
// credential (the handler is stateless: no MCP session outlives its
// request). kernelAPI is annald's API handler, called in process.
func HTTPHandler(kernelAPI http.Handler, version string) http.Handler {
	apiClient := func(cred string) *client.Client {
		c, err := client.New("http://annald.internal", cred)
		if err != nil {
			panic(err) // a constant URL
		}
		return c.WithHTTPClient(&http.Client{Transport: handlerTransport{kernelAPI}})
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		return NewServer(apiClient(bearer(r)), version)
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred := bearer(r)
		if cred == "" {
			unauthorized(w, "send \"Authorization: Bearer <credential>\": the MCP server acts with your credential")
			return
		}
		if _, err := apiClient(cred).WhoAmI(r.Context()); err != nil {
			if client.IsStatus(err, http.StatusUnauthorized) {
				unauthorized(w, "the credential belongs to no actor")
				return
			}
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBody)
		// The caller's W3C traceparent goes on with each call the tools
		// make (the Go client sends the span in its context), so the
		// events an MCP call leads to record the caller's trace id.
		r = r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		mcpHandler.ServeHTTP(w, r)
	})
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="annal"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// bearer is the credential of a request's Authorization header, or "".
func bearer(r *http.Request) string {
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(cred)
}

// handlerTransport sends a client's requests to an http.Handler in
// process: the MCP server uses annald's API exactly as a remote client
// would (authentication, limits, every rule), without a network hop.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}
