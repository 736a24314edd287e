package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The receipt mode measures an annald and a baseline annald (here the
// same binary) in interleaved blocks, through both clients, beside the
// durable writes of a lone receipt's size in the data folder, and prints
// each p50 and the ratios.
func TestReceipt_SmallScale(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two annalds")
	}
	o := testOptions(t)
	o.sequentialN = 20
	bin, err := findAnnald(context.Background(), o.dir)
	if err != nil {
		t.Fatal(err)
	}
	o.annald = bin
	var out bytes.Buffer
	if err := runReceipt(context.Background(), o, receiptOptions{baseline: bin, block: 10}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"receipt, annald ", "receipt, annald, lean poster", "receipt, baseline ", "receipt, baseline, lean poster",
		"append + fdatasync", "overwrite + fdatasync (the WAL's form)", "pwrite O_DSYNC",
		"(annald, its receipts)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	// 20 receipts a server and client, and as many writes of each form,
	// of the size the write-ahead log wrote (not the 512 of a guess).
	if !regexp.MustCompile(`durable write of \d+ B, overwrite \+ fdatasync \(the WAL's form\)\s+20\s`).MatchString(out.String()) ||
		strings.Contains(out.String(), "durable write of 512 B") {
		t.Errorf("the durable writes are not 20 of a receipt's size:\n%s", out.String())
	}
	if left, _ := filepath.Glob(filepath.Join(o.dir, "*", "wal", "bench-sync-probe-*")); len(left) > 0 {
		t.Errorf("the probe's files are left: %v", left)
	}
}
