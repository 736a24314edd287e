package verifier

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/bundle"
	"github.com/transparency-dev/merkle/compact"
)

// syntheticBundle writes a range bundle of n action events, the whole log,
// without the reference tree (which keeps every node): the root comes from
// a compact range, as a Tessera log computes it.
func syntheticBundle(b *testing.B, n int) ([]byte, *Policy) {
	b.Helper()
	skey, vkey, err := checkpoints.GenerateLogKey(testOrigin)
	if err != nil {
		b.Fatal(err)
	}
	f := &compact.RangeFactory{Hash: hasher.HashChildren}
	r := f.NewEmptyRange(0)
	var events []byte
	for i := range n {
		e := actionEntry(i)
		leaf := sha256.Sum256(append([]byte{0}, e...))
		if err := r.Append(leaf[:], nil); err != nil {
			b.Fatal(err)
		}
		events = bundle.AppendRangeLine(events, uint64(i), e, nil)
	}
	root, err := r.GetRootHash(nil)
	if err != nil {
		b.Fatal(err)
	}
	s, err := checkpoints.NewLogSigner(skey)
	if err != nil {
		b.Fatal(err)
	}
	cp, err := checkpoints.SignCheckpoint(checkpoints.Checkpoint{Origin: testOrigin, Size: uint64(n), Hash: [32]byte(root)}, s)
	if err != nil {
		b.Fatal(err)
	}
	from, to := uint64(0), uint64(n)
	out := canonicalLine(b, bundle.Header{Bundle: bundle.Format, Checkpoint: string(cp), Proof: bundle.ProofRange,
		Selection: bundle.Selection{From: &from, To: &to}})
	out = append(out, events...)
	out = append(out, canonicalLine(b, bundle.Trailer{End: bundle.Format, Events: uint64(n)})...)
	p, err := ParsePolicy([]byte("log " + vkey + "\nquorum none\n"))
	if err != nil {
		b.Fatal(err)
	}
	return out, p
}

// BenchmarkVerifyBundle reports events/s for range bundles of 10K, 100K and
// 1M events (1M is skipped under -short).
func BenchmarkVerifyBundle(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			if n > 100_000 && testing.Short() {
				b.Skip("1M events under -short")
			}
			data, p := syntheticBundle(b, n)
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			cpu0 := cpuTime()
			for b.Loop() {
				res, err := VerifyBundle(bytes.NewReader(data), p, nil)
				if err != nil {
					b.Fatal(err)
				}
				if res.Events != uint64(n) {
					b.Fatalf("%d events", res.Events)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			// On a shared machine wall time depends on the neighbours;
			// events per CPU-second do not.
			b.ReportMetric(float64(n)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
		})
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVerifyBundleInclusion: a sparse bundle, one inclusion proof per
// event (every third event of a 30K log).
func BenchmarkVerifyBundleInclusion(b *testing.B) {
	l := newTestLog(b, testOrigin, 30_000)
	var idx []uint64
	for i := uint64(0); i < 30_000; i += 3 {
		idx = append(idx, i)
	}
	data := l.bundle(bundleSpec{proof: bundle.ProofInclusion, indices: idx})
	p := policyFor(b, l, "none")
	b.ResetTimer()
	for b.Loop() {
		if _, err := VerifyBundle(bytes.NewReader(data), p, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(idx))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkVerifyProof: whole c2sp.org/tlog-proof verifications (parse,
// checkpoint signature, event, inclusion) per second, on one goroutine and
// on all.
func BenchmarkVerifyProof(b *testing.B) {
	l := newTestLog(b, testOrigin, 100_000)
	entry, proofText := l.entries[54_321], l.proof(54_321, 100_000)
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := VerifyProof(entry, proofText, l.vkey); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proofs/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := VerifyProof(entry, proofText, l.vkey); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proofs/s")
	})
}
