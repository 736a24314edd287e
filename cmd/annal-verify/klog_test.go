package main

import (
	"flag"
	"io"
	"os"
	"testing"

	"k8s.io/klog/v2"
)

// TestMain keeps Tessera's klog lines out of test output unless -v is given.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}
