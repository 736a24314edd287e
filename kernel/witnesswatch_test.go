package kernel

import (
	"errors"
	"strings"
	"testing"
)

// TestWitnessPolicyMustNameThisLog: a witness policy whose log lines name
// another log's key is refused at start, naming both keys; a policy
// naming this log, or no log, starts.
func TestWitnessPolicyMustNameThisLog(t *testing.T) {
	dir := t.TempDir()
	k := openTest(t, dir)
	key := k.VerifierKey()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	_, other, err := generateLogKey("other.example/log")
	if err != nil {
		t.Fatal(err)
	}
	const witness = "witness w1 witness.example/w1+00000000+BMhN3o2SPUL6SlNtP1b8K0n37kFM7y9W0B3EB8MSh5Pv http://127.0.0.1:1\nquorum w1\n"
	cfg := testConfig(t, dir)
	cfg.WitnessPolicy = []byte("log " + other + "\n" + witness)
	_, err = Open(cfg)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), key) {
		t.Fatalf("a policy for another log: %v", err)
	}
	for _, policy := range []string{"log " + key + "\n" + witness, witness} {
		if err := checkPolicyLog([]byte(policy), key); err != nil {
			t.Errorf("policy %q: %v", policy, err)
		}
	}
}
