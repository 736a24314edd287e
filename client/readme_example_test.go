package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/verifier"
)

// readmeGoExample is the README's Go example ("Agents in Go"), line for
// line: TestREADMEGoExample checks that the README shows these lines and
// runs them.
func readmeGoExample(ctx context.Context) {
	c, _ := client.New(os.Getenv("ANNAL_URL"), os.Getenv("ANNAL_CREDENTIAL"))
	rc, _ := c.SubmitAndWait(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/notes.md", Payload: json.RawMessage(`{"text":"hello"}`)})
	entry, _ := c.Event(ctx, rc.Index)
	p, err := verifier.VerifyProof(entry, []byte(rc.Proof), os.Getenv("ANNAL_VERIFIER_KEY"))
	fmt.Println(p.Index, p.Size, p.Origin, err) // checked offline against the log's key alone
}

// The README's Go example is the body of readmeGoExample, and run as an
// agent against a kernel it submits an action and verifies its tlog-proof
// offline.
func TestREADMEGoExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)func readmeGoExample\(ctx context.Context\) \{\n(.*?)\n\}`).FindSubmatch(src)
	var lines []string
	for _, l := range strings.Split(string(body[1]), "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	block := "```go\n" + strings.Join(lines, "\n") + "\n```"
	if !bytes.Contains(readme, []byte(block)) {
		t.Fatalf("the README does not show the example as readmeGoExample has it:\n%s", block)
	}
	if len(lines) > 5 {
		t.Fatalf("the example is %d lines", len(lines))
	}

	url, rootCredential, stop := exampleKernel()
	defer stop()
	root, err := client.New(url, rootCredential)
	if err != nil {
		t.Fatal(err)
	}
	info, err := root.Info(context.Background()) // in a deployment: annal-data/log.pub
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ANNAL_URL", url)
	t.Setenv("ANNAL_CREDENTIAL", exampleAgent(url, rootCredential))
	t.Setenv("ANNAL_VERIFIER_KEY", info.VerifierKey)
	r, w, _ := os.Pipe()
	stdout := os.Stdout
	os.Stdout = w
	readmeGoExample(context.Background())
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if !regexp.MustCompile(`^\d+ \d+ \S+ <nil>\n$`).Match(out) {
		t.Fatalf("the example printed %q", out)
	}
}
