package servicestest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// NPMBin is the path of a program from the npm packages .ci/test installs
// (.ci/npm, named by ANNAL_NPM_BIN): MCP clients and servers no one here
// wrote. Without them the test skips, unless ANNAL_REQUIRE_BROWSER or
// ANNAL_REQUIRE_SERVICES says this is the full test run.
func NPMBin(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("ANNAL_NPM_BIN")
	if dir == "" {
		_, here, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(here), "..", "..", ".ci", "npm", "node_modules", ".bin")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Getenv("ANNAL_REQUIRE_BROWSER") != "" || os.Getenv("ANNAL_REQUIRE_SERVICES") == "1" {
		t.Fatalf("%s (npm) is not installed: bash .ci/test installs it", name)
	}
	t.Skipf("%s (npm) is not installed: bash .ci/test installs it", name)
	return ""
}
