package kernel

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// Identify finds who a credential belongs to as Authenticate does, without
// the kernel's lock: while agents are created, after a restart (the
// credentials then come from the state file), and never for a credential
// that belongs to no one.
func TestIdentify(t *testing.T) {
	dir := t.TempDir()
	k := openTest(t, dir)
	root := rootOf(t, k)
	rootCred, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		t.Fatal(err)
	}

	same := func(t *testing.T, k *Kernel, cred string) {
		t.Helper()
		full, err := k.Authenticate(cred)
		if err != nil {
			t.Fatal(err)
		}
		who, err := k.Identify(cred)
		if err != nil {
			t.Fatal(err)
		}
		if who.ID != full.ID || who.Kind != full.Kind {
			t.Fatalf("Identify gives %s (%s), Authenticate %s (%s)", who.ID, who.Kind, full.ID, full.Kind)
		}
	}
	same(t, k, strings.TrimSpace(string(rootCred)))
	if who, _ := k.Identify(strings.TrimSpace(string(rootCred))); who.ID != root.ID || !who.IsHuman() {
		t.Fatalf("root identifies as %+v", who.ActorRecord)
	}

	// Agents created while other goroutines identify them and the root:
	// each is found once its creation has returned (run with -race).
	const agents = 16
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := k.Identify(strings.TrimSpace(string(rootCred))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var created []string
	for range agents {
		na, err := k.CreateAgent(context.Background(), root, ActorRequest{Name: "a", Purpose: "identify"})
		if err != nil {
			t.Fatal(err)
		}
		who, err := k.Identify(na.Credential)
		if err != nil || who.ID != na.Actor.ID || who.Kind != event.Agent {
			t.Fatalf("a new agent %s identifies as %+v, %v", na.Actor.ID, who, err)
		}
		created = append(created, na.Credential)
	}
	close(stop)
	wg.Wait()

	for _, bad := range []string{"", "annal_" + strings.Repeat("A", 43), created[0] + "x"} {
		if who, err := k.Identify(bad); !errors.Is(err, ErrUnauthenticated) || who != nil {
			t.Errorf("Identify(%q) = %v, %v; want ErrUnauthenticated", bad, who, err)
		}
	}

	// Submit takes what Identify gives.
	who, err := k.Identify(created[0])
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := k.Submit(context.Background(), who, ActionRequest{Type: event.Observe, Target: "workspace/x"}); err != nil || rc.Actor != who.ID {
		t.Fatalf("Submit as an identified agent: %+v, %v", rc, err)
	}

	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	k = openTest(t, dir)
	defer k.Close()
	for _, cred := range created {
		same(t, k, cred)
	}
}
