// Package klogtest runs a package's tests with Tessera's klog lines kept out
// of the output unless -v is given, so that a failing test's own messages
// are not buried.
package klogtest

import (
	"flag"
	"io"
	"os"
	"testing"

	"k8s.io/klog/v2"
)

// Main is a whole TestMain: func TestMain(m *testing.M) { klogtest.Main(m) }.
func Main(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}
