package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/rfc6962"
)

// Fixed ids and times keep every entry in these tests the same on each run.
const (
	genesisID = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"
	createdID = "017f22e2-79b1-7cc3-98c4-dc0c0c07398f"
	actionID  = "017f22e2-79b2-7cc3-98c4-dc0c0c07398f"
	testTime  = "2024-05-06T07:08:09.123456789Z"
)

var credential = strings.Repeat("ab", 32)

func genesisEvent() *Event {
	return &Event{V: Version, ID: genesisID, Time: mustInstant(testTime), Kind: KindGenesis, Actor: "alice",
		Log:     &LogInfo{Origin: "log.annal.example/test", Software: "annal test"},
		Subject: &ActorRecord{ID: "alice", Kind: Human, Name: "Alice", CredentialSHA256: credential}}
}

func actorCreatedEvent() *Event {
	return &Event{V: Version, ID: createdID, Time: mustInstant("2024-05-06T07:08:10Z"), Kind: KindActorCreated, Actor: "alice",
		Subject: &ActorRecord{ID: "agent-1", Kind: Agent, Name: "Mail helper", Purpose: "sorts mail",
			Creator: "alice", Expires: mustInstant("2025-01-01T00:00:00Z"), CredentialSHA256: credential}}
}

func actionEvent(t ActionType) *Event {
	return &Event{V: Version, ID: actionID, Time: mustInstant("2024-05-06T07:08:11.5Z"), Kind: KindAction, Actor: "agent-1",
		Action:   &Action{Type: t, Target: "mail/inbox/42", Payload: json.RawMessage(`{"flag":"read"}`)},
		Decision: &Decision{Outcome: OutcomeCommitted, Cost: 3, Reserved: 3, Settled: 2}}
}

func mustEncode(t testing.TB, e *Event) []byte {
	t.Helper()
	entry, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return entry
}

func sampleEvents() map[string]*Event {
	m := map[string]*Event{
		"genesis":       genesisEvent(),
		"actor.created": actorCreatedEvent(),
		"human created": {V: Version, ID: createdID, Time: mustInstant(testTime), Kind: KindActorCreated, Actor: "alice",
			Subject: &ActorRecord{ID: "bob", Kind: Human, Name: "Bob", CredentialSHA256: credential}},
	}
	for _, typ := range []ActionType{Observe, Create, Mutate, Execute} {
		m["action "+string(typ)] = actionEvent(typ)
	}
	hashed := actionEvent(Create)
	hashed.Action.Payload, hashed.Action.PayloadHash = nil, "sha256:"+strings.Repeat("0f", 32)
	m["action with payload_hash"] = hashed
	bare := actionEvent(Observe)
	bare.Action.Payload = nil
	m["action without payload"] = bare
	null := actionEvent(Execute)
	null.Action.Payload = json.RawMessage(`null`)
	m["action with null payload"] = null
	return m
}

func TestEncodeParse_RoundTrip(t *testing.T) {
	for name, e := range sampleEvents() {
		t.Run(name, func(t *testing.T) {
			entry := mustEncode(t, e)
			got, err := Parse(entry)
			if err != nil {
				t.Fatalf("Parse(%s): %v", entry, err)
			}
			if !reflect.DeepEqual(got, e) {
				t.Errorf("Parse gives %+v, want %+v", got, e)
			}
			if again := mustEncode(t, got); !bytes.Equal(again, entry) {
				t.Errorf("encoding the parsed event gives %s, want %s", again, entry)
			}
		})
	}
}

// TestEncode_Layout pins the field names and the RFC 8785 order (members
// sorted by name, no white space) of one event of each kind.
func TestEncode_Layout(t *testing.T) {
	for _, tc := range []struct {
		e    *Event
		want string
	}{
		{genesisEvent(), `{"actor":"alice","id":"` + genesisID + `","kind":"log.genesis","log":{"origin":"log.annal.example/test","software":"annal test"},` +
			`"subject":{"credential_sha256":"` + credential + `","id":"alice","kind":"human","name":"Alice"},"time":"` + testTime + `","v":1}`},
		{actorCreatedEvent(), `{"actor":"alice","id":"` + createdID + `","kind":"actor.created","subject":{"creator":"alice","credential_sha256":"` + credential +
			`","expires":"2025-01-01T00:00:00Z","id":"agent-1","kind":"agent","name":"Mail helper","purpose":"sorts mail"},"time":"2024-05-06T07:08:10Z","v":1}`},
		{actionEvent(Mutate), `{"action":{"payload":{"flag":"read"},"target":"mail/inbox/42","type":"mutate"},"actor":"agent-1",` +
			`"decision":{"cost":3,"outcome":"committed","reserved":3,"settled":2},"id":"` + actionID + `","kind":"action","time":"2024-05-06T07:08:11.5Z","v":1}`},
	} {
		if got := string(mustEncode(t, tc.e)); got != tc.want {
			t.Errorf("Encode =\n%s\nwant\n%s", got, tc.want)
		}
	}
}

func TestEncode_CanonicalisesPayload(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{ "b" : 1, "a" : [ 1 , 2 ] }`, `{"a":[1,2],"b":1}`},
		{`{"é":1,"e":2,"z":3,"A":4}`, `{"A":4,"e":2,"z":3,"é":1}`},
		{`"\u00e9\ud83d\ude00\/\u0041"`, `"é😀/A"`},
		{`"<>&\u2028\u001f\"\\"`, `"<>&` + "\u2028" + `\u001f\"\\"`},
		{`[1E2, -0, 0.5, 1e21, 0.00000095367431640625, 100000000000000000000]`, `[100,0,0.5,1e+21,9.5367431640625e-7,100000000000000000000]`},
	} {
		e := actionEvent(Mutate)
		e.Action.Payload = json.RawMessage(tc.in)
		entry := mustEncode(t, e)
		want := `"payload":` + tc.want + `,"target"`
		if !bytes.Contains(entry, []byte(want)) {
			t.Errorf("payload %s: entry %s does not contain %s", tc.in, entry, want)
		}
		if _, err := Parse(entry); err != nil {
			t.Errorf("payload %s: Parse refuses what Encode wrote: %v", tc.in, err)
		}
	}
}

func TestEncode_Rejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		base    func() *Event
		mutate  func(*Event)
		wantErr string
	}{
		{"version 2", genesisEvent, func(e *Event) { e.V = 2 }, "event version 2 is not 1"},
		{"version 0", genesisEvent, func(e *Event) { e.V = 0 }, "event version 0 is not 1"},
		{"upper-case id", genesisEvent, func(e *Event) { e.ID = strings.ToUpper(genesisID) }, "is not a lower-case UUID"},
		{"id without dashes", genesisEvent, func(e *Event) { e.ID = strings.ReplaceAll(genesisID, "-", "") }, "is not a lower-case UUID"},
		{"id in braces", genesisEvent, func(e *Event) { e.ID = "{" + genesisID + "}" }, "is not a lower-case UUID"},
		{"id not hex", genesisEvent, func(e *Event) { e.ID = "017f22e2-79b0-7cc3-98c4-dc0c0c07398g" }, "is not a lower-case UUID"},
		{"empty id", genesisEvent, func(e *Event) { e.ID = "" }, `event id "" is not a lower-case UUID`},
		{"unknown kind", genesisEvent, func(e *Event) { e.Kind = "actor.deleted" }, `unknown kind "actor.deleted"`},
		{"empty kind", genesisEvent, func(e *Event) { e.Kind = "" }, `unknown kind ""`},
		{"upper-case actor", genesisEvent, func(e *Event) { e.Actor = "Alice" }, `actor "Alice" is not a valid actor id`},
		{"actor starts with digit", actionEventOf(Observe), func(e *Event) { e.Actor = "1agent" }, `actor "1agent" is not a valid actor id`},
		{"actor with underscore", actionEventOf(Observe), func(e *Event) { e.Actor = "agent_1" }, "is not a valid actor id"},
		{"actor 65 bytes", actionEventOf(Observe), func(e *Event) { e.Actor = "a" + strings.Repeat("b", 64) }, "is not a valid actor id"},
		{"empty actor", actionEventOf(Observe), func(e *Event) { e.Actor = "" }, `actor "" is not a valid actor id`},
		{"genesis without log", genesisEvent, func(e *Event) { e.Log = nil }, `of kind log.genesis lacks "log"`},
		{"genesis without subject", genesisEvent, func(e *Event) { e.Subject = nil }, `of kind log.genesis lacks "subject"`},
		{"genesis with action", genesisEvent, func(e *Event) { e.Action = actionEvent(Observe).Action }, `of kind log.genesis may not carry "action"`},
		{"genesis of an agent", genesisEvent, func(e *Event) { e.Subject.Kind = Agent; e.Subject.Creator, e.Subject.Purpose = "bob", "x" }, "genesis must create its own actor, a human"},
		{"genesis of another actor", genesisEvent, func(e *Event) { e.Subject.ID = "bob" }, "genesis must create its own actor, a human"},
		{"log without origin", genesisEvent, func(e *Event) { e.Log.Origin = "" }, "log origin and software must be set"},
		{"log without software", genesisEvent, func(e *Event) { e.Log.Software = "" }, "log origin and software must be set"},
		{"log origin not UTF-8", genesisEvent, func(e *Event) { e.Log.Origin = "a\xff" }, "log origin and software must be UTF-8"},
		{"created with log", actorCreatedEvent, func(e *Event) { e.Log = genesisEvent().Log }, `of kind actor.created may not carry "log"`},
		{"created with decision", actorCreatedEvent, func(e *Event) { e.Decision = actionEvent(Observe).Decision }, `may not carry "decision"`},
		{"subject bad id", actorCreatedEvent, func(e *Event) { e.Subject.ID = "Agent 1" }, `actor id "Agent 1" is not valid`},
		{"subject bad kind", actorCreatedEvent, func(e *Event) { e.Subject.Kind = "robot" }, `kind "robot" is neither human nor agent`},
		{"subject empty name", actorCreatedEvent, func(e *Event) { e.Subject.Name = "" }, "name must be 1 to 256 bytes"},
		{"subject name 257 bytes", actorCreatedEvent, func(e *Event) { e.Subject.Name = strings.Repeat("n", 257) }, "name must be 1 to 256 bytes"},
		{"subject name not UTF-8", actorCreatedEvent, func(e *Event) { e.Subject.Name = "\xc3" }, "name and purpose must be UTF-8"},
		{"subject purpose not UTF-8", actorCreatedEvent, func(e *Event) { e.Subject.Purpose = "x\xffy" }, "name and purpose must be UTF-8"},
		{"subject purpose 4097 bytes", actorCreatedEvent, func(e *Event) { e.Subject.Purpose = strings.Repeat("p", 4097) }, "purpose is longer than 4096 bytes"},
		{"agent without creator", actorCreatedEvent, func(e *Event) { e.Subject.Creator = "" }, "agent agent-1 must declare its creator and purpose"},
		{"agent without purpose", actorCreatedEvent, func(e *Event) { e.Subject.Purpose = "" }, "agent agent-1 must declare its creator and purpose"},
		{"subject bad creator", actorCreatedEvent, func(e *Event) { e.Subject.Creator = "Alice" }, `creator "Alice" is not a valid actor id`},
		{"subject expiry in the year 10000", actorCreatedEvent, func(e *Event) { e.Subject.Expires = At(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) }, "outside the years 0001 to 9999"},
		{"subject credential upper-case", actorCreatedEvent, func(e *Event) { e.Subject.CredentialSHA256 = strings.ToUpper(credential) }, "credential_sha256 is not 64 lower-case hex digits"},
		{"subject credential short", actorCreatedEvent, func(e *Event) { e.Subject.CredentialSHA256 = credential[2:] }, "credential_sha256 is not 64 lower-case hex digits"},
		{"action without action", actionEventOf(Observe), func(e *Event) { e.Action = nil }, `of kind action lacks "action"`},
		{"action without decision", actionEventOf(Observe), func(e *Event) { e.Decision = nil }, `of kind action lacks "decision"`},
		{"action with subject", actionEventOf(Observe), func(e *Event) { e.Subject = genesisEvent().Subject }, `of kind action may not carry "subject"`},
		{"action type delete", actionEventOf(Observe), func(e *Event) { e.Action.Type = "delete" }, `action type "delete" is not one of observe, create, mutate, execute`},
		{"action type upper-case", actionEventOf(Observe), func(e *Event) { e.Action.Type = "Observe" }, `action type "Observe" is not one of`},
		{"target with ..", actionEventOf(Observe), func(e *Event) { e.Action.Target = "a/../b" }, `target "a/../b" has a ".." segment`},
		{"target ..", actionEventOf(Observe), func(e *Event) { e.Action.Target = ".." }, `target ".." has a ".." segment`},
		{"target with .", actionEventOf(Observe), func(e *Event) { e.Action.Target = "a/./b" }, `target "a/./b" has a "." segment`},
		{"empty target", actionEventOf(Observe), func(e *Event) { e.Action.Target = "" }, "target is empty"},
		{"absolute target", actionEventOf(Observe), func(e *Event) { e.Action.Target = "/x" }, `target "/x" has an empty path segment`},
		{"target trailing slash", actionEventOf(Observe), func(e *Event) { e.Action.Target = "x/" }, `target "x/" has an empty path segment`},
		{"target a//b", actionEventOf(Observe), func(e *Event) { e.Action.Target = "a//b" }, `target "a//b" has an empty path segment`},
		{"target with NUL", actionEventOf(Observe), func(e *Event) { e.Action.Target = "a\x00b" }, "contains a control character or backslash"},
		{"target with newline", actionEventOf(Observe), func(e *Event) { e.Action.Target = "a\nb" }, "contains a control character or backslash"},
		{"target with tab", actionEventOf(Observe), func(e *Event) { e.Action.Target = "a\tb" }, "contains a control character or backslash"},
		{"target with DEL", actionEventOf(Observe), func(e *Event) { e.Action.Target = "a\x7f" }, "contains a control character or backslash"},
		{"target with backslash", actionEventOf(Observe), func(e *Event) { e.Action.Target = `a\b` }, "contains a control character or backslash"},
		{"target not UTF-8", actionEventOf(Observe), func(e *Event) { e.Action.Target = "a/\xff" }, `target "a/\xff" is not valid UTF-8`},
		{"target 1025 bytes", actionEventOf(Observe), func(e *Event) { e.Action.Target = strings.Repeat("x", 1025) }, "target is 1025 bytes, more than 1024"},
		{"payload and payload_hash", actionEventOf(Observe), func(e *Event) { e.Action.PayloadHash = "sha256:" + strings.Repeat("0", 64) }, "carries both payload and payload_hash; send one"},
		{"payload_hash upper-case", actionEventOf(Observe), func(e *Event) {
			e.Action.Payload, e.Action.PayloadHash = nil, "sha256:"+strings.Repeat("A", 64)
		}, `is not "sha256:<64 lower-case hex>"`},
		{"payload_hash 63 hex", actionEventOf(Observe), func(e *Event) {
			e.Action.Payload, e.Action.PayloadHash = nil, "sha256:"+strings.Repeat("a", 63)
		}, `is not "sha256:<64 lower-case hex>"`},
		{"payload_hash without prefix", actionEventOf(Observe), func(e *Event) {
			e.Action.Payload, e.Action.PayloadHash = nil, strings.Repeat("a", 64)
		}, `is not "sha256:<64 lower-case hex>"`},
		{"payload_hash sha512", actionEventOf(Observe), func(e *Event) {
			e.Action.Payload, e.Action.PayloadHash = nil, "sha512:"+strings.Repeat("a", 64)
		}, `is not "sha256:<64 lower-case hex>"`},
		{"payload not JSON", actionEventOf(Observe), func(e *Event) { e.Action.Payload = json.RawMessage(`{"a":`) }, "payload: JSON is malformed"},
		{"payload beyond doubles", actionEventOf(Observe), func(e *Event) { e.Action.Payload = json.RawMessage(`9007199254740993`) }, "payload: JSON number 9007199254740993 would be written 9007199254740992"},
		{"payload duplicate member", actionEventOf(Observe), func(e *Event) { e.Action.Payload = json.RawMessage(`{"a":1,"a":2}`) }, `payload: JSON object has the member "a" twice`},
		{"payload too deep", actionEventOf(Observe), func(e *Event) { e.Action.Payload = nested(MaxJSONDepth + 1) }, "payload: JSON nests deeper than 32 levels"},
		{"payload lone surrogate", actionEventOf(Observe), func(e *Event) { e.Action.Payload = json.RawMessage(`"\ud800"`) }, `payload: JSON string has a lone UTF-16 surrogate \ud800`},
		{"outcome denied", actionEventOf(Observe), func(e *Event) { e.Decision.Outcome = "denied" }, `unknown outcome "denied"`},
		{"cost beyond 2^53", actionEventOf(Observe), func(e *Event) { e.Decision.Cost = MaxEnergy + 1 }, "must be at most 2^53"},
		{"settled beyond 2^53", actionEventOf(Observe), func(e *Event) { e.Decision.Settled = 1<<64 - 1 }, "must be at most 2^53"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.base()
			tc.mutate(e)
			entry, err := Encode(e)
			if err == nil {
				t.Fatalf("encoded as %s", entry)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}

func actionEventOf(t ActionType) func() *Event { return func() *Event { return actionEvent(t) } }

// nested returns depth nested JSON arrays around 1: nested(2) is [[1]].
func nested(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth))
}

func TestValidateTarget_Accepts(t *testing.T) {
	for _, target := range []string{"a", "a/b", "workspace/x/y.txt", "a/.../b", ".hidden/x", "a b/c", "é/日本", "*/?", strings.Repeat("x", MaxTargetSize)} {
		if err := ValidateTarget(target); err != nil {
			t.Errorf("ValidateTarget(%q) = %v", target, err)
		}
	}
}

func TestActionType_Valid(t *testing.T) {
	for typ, want := range map[ActionType]bool{Observe: true, Create: true, Mutate: true, Execute: true, "": false, "delete": false, "OBSERVE": false} {
		if got := typ.Valid(); got != want {
			t.Errorf("%q.Valid() = %v, want %v", typ, got, want)
		}
	}
}

// TestPayloadDepth_EncodedEntryParses guards the kernel's replay: a payload
// as deep as CheckJSON allows sits two levels down in the entry, and Parse
// must still read the entry Encode wrote.
func TestPayloadDepth_EncodedEntryParses(t *testing.T) {
	for _, depth := range []int{MaxJSONDepth - 1, MaxJSONDepth} {
		e := actionEvent(Mutate)
		e.Action.Payload = nested(depth)
		if err := CheckJSON(e.Action.Payload); err != nil {
			t.Fatalf("depth %d: CheckJSON: %v", depth, err)
		}
		if _, err := Parse(mustEncode(t, e)); err != nil {
			t.Errorf("depth %d: Parse refuses what Encode wrote: %v", depth, err)
		}
	}
	entry := bytes.Replace(mustEncode(t, actionEvent(Mutate)), []byte(`{"flag":"read"}`), nested(MaxJSONDepth+1), 1)
	if _, err := Parse(entry); err == nil || !strings.Contains(err.Error(), "nests deeper than 34 levels") {
		t.Errorf("entry with a payload %d deep: Parse = %v, want a depth error", MaxJSONDepth+1, err)
	}
}

// entryOfSize returns an action event whose encoding is exactly size bytes,
// by padding its payload string.
func entryOfSize(t *testing.T, size int) *Event {
	t.Helper()
	e := actionEvent(Create)
	e.Action.Payload = json.RawMessage(`""`)
	pad := size - len(mustEncode(t, e))
	if pad < 0 {
		t.Fatalf("an event cannot be as small as %d bytes", size)
	}
	e.Action.Payload = json.RawMessage(`"` + strings.Repeat("x", pad) + `"`)
	return e
}

func TestMaxEntrySize_Boundary(t *testing.T) {
	e := entryOfSize(t, MaxEntrySize)
	entry := mustEncode(t, e)
	if len(entry) != MaxEntrySize {
		t.Fatalf("entry is %d bytes, want %d", len(entry), MaxEntrySize)
	}
	if _, err := Parse(entry); err != nil {
		t.Errorf("an entry of exactly MaxEntrySize bytes is refused: %v", err)
	}

	_, err := Encode(entryOfSize(t, MaxEntrySize+1))
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Size != MaxEntrySize+1 {
		t.Fatalf("Encode of a %d-byte event = %v, want *TooLargeError{%d}", MaxEntrySize+1, err, MaxEntrySize+1)
	}
	if !strings.Contains(err.Error(), "65536 bytes encoded, more than a log entry's limit of 65535") || !strings.Contains(err.Error(), "payload_hash") {
		t.Errorf("error %q does not give the sizes and the way out", err)
	}

	big := append(bytes.Clone(entry), ' ')
	_, err = Parse(big)
	if !errors.As(err, &tooLarge) || tooLarge.Size != MaxEntrySize+1 {
		t.Errorf("Parse of %d bytes = %v, want *TooLargeError", len(big), err)
	}
}

func TestParse_RejectsNonCanonical(t *testing.T) {
	good := string(mustEncode(t, actionEvent(Mutate)))
	genesis := string(mustEncode(t, genesisEvent()))
	for _, tc := range []struct{ name, entry, wantErr string }{
		{"space after brace", "{ " + good[1:], "entry is not in canonical form (RFC 8785)"},
		{"space after colon", strings.Replace(good, `"v":1`, `"v": 1`, 1), "not in canonical form"},
		{"trailing newline", good + "\n", "not in canonical form"},
		{"leading space", " " + good, "not in canonical form"},
		{"unsorted members", `{"actor":"agent-1","action":` + good[len(`{"action":`):strings.Index(good, `,"actor"`)] + good[strings.Index(good, `,"decision"`):], "not in canonical form"},
		{"unsorted payload members", strings.Replace(good, `{"flag":"read"}`, `{"z":1,"a":2}`, 1), "not in canonical form"},
		{"escaped letter", strings.Replace(good, `"read"`, `"re\u0061d"`, 1), "not in canonical form"},
		{"escaped slash", strings.Replace(good, `mail/inbox`, `mail\/inbox`, 1), "not in canonical form"},
		{"escaped non-ASCII", strings.Replace(genesis, `annal test`, `annal t\u00e9st`, 1), "not in canonical form"},
		{"number 1.0", strings.Replace(good, `"v":1`, `"v":1.0`, 1), "entry is not an event"},
		{"number 3e0", strings.Replace(good, `"cost":3`, `"cost":3e0`, 1), "entry is not an event"},
		{"payload number 3e0", strings.Replace(good, `{"flag":"read"}`, `3e0`, 1), "not in canonical form"},
		{"upper-case member", strings.Replace(good, `"v":1`, `"V":1`, 1), `JSON member "V" is not known: member names are case-sensitive, and this one is "v"`},
		{"unknown member", strings.Replace(good, `"v":1}`, `"v":1,"x":1}`, 1), `entry is not an event: JSON member "x" is not known`},
		{"duplicate member", strings.Replace(good, `"v":1}`, `"v":1,"v":1}`, 1), `entry: JSON object has the member "v" twice`},
		{"null member", strings.Replace(good, `"kind":"action"`, `"kind":"action","log":null`, 1), "not in canonical form"},
		{"payload with a number canonical JSON rewrites", strings.Replace(good, `{"flag":"read"}`, `0.10000000000000000001`, 1), "entry: JSON number 0.10000000000000000001 would be written 0.1"},
		{"payload with lone surrogate", strings.Replace(good, `{"flag":"read"}`, `"\ud800"`, 1), "entry: JSON string has a lone UTF-16 surrogate"},
		{"invalid UTF-8", strings.Replace(good, `read`, "re\xffd", 1), "entry: JSON is not valid UTF-8"},
		{"byte order mark", "\ufeff" + good, "entry: JSON is malformed"},
		{"two values", good + good, "entry: JSON has data after its value"},
		{"wrong field type", strings.Replace(good, `"v":1`, `"v":"1"`, 1), "entry is not an event"},
		{"invalid field", strings.Replace(good, `"type":"mutate"`, `"type":"delete"`, 1), `action type "delete" is not one of`},
		{"empty", "", "entry: JSON is malformed"},
		{"null", "null", "event version 0 is not 1"},
		{"array", "[]", "entry is not an event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(tc.entry))
			if err == nil {
				t.Fatalf("Parse(%q) = %+v", tc.entry, e)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}

func TestLeafHash(t *testing.T) {
	entries := [][]byte{nil, []byte("{}")}
	for _, e := range sampleEvents() {
		entries = append(entries, mustEncode(t, e))
	}
	for _, entry := range entries {
		got := LeafHash(entry)
		// RFC 6962 §2.1: MTH({d(0)}) = SHA-256(0x00 || d(0)).
		want := sha256.Sum256(append([]byte{0x00}, entry...))
		if got != want {
			t.Errorf("LeafHash(%q) = %x, SHA-256(0x00 || entry) = %x", entry, got, want)
		}
		if lib := rfc6962.DefaultHasher.HashLeaf(entry); !bytes.Equal(got[:], lib) {
			t.Errorf("LeafHash(%q) = %x, merkle rfc6962 gives %x", entry, got, lib)
		}
		if plain := sha256.Sum256(entry); got == plain {
			t.Errorf("LeafHash(%q) is the plain SHA-256: no leaf domain separation", entry)
		}
	}
}

func TestCredentialHash(t *testing.T) {
	// FIPS 180-2 appendix B.1: SHA-256("abc").
	if got, want := CredentialHash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("CredentialHash(abc) = %s, want %s", got, want)
	}
	h := sha256.Sum256([]byte("secret"))
	if got := CredentialHash("secret"); got != hex.EncodeToString(h[:]) || !hexHashPattern.MatchString(got) {
		t.Errorf("CredentialHash(secret) = %s, not the lower-case hex SHA-256", got)
	}
}

func TestFormatTime(t *testing.T) {
	paris := time.FixedZone("CEST", 2*3600)
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2024, 5, 6, 9, 8, 9, 0, paris), "2024-05-06T07:08:09Z"},
		{time.Date(2024, 5, 6, 7, 8, 9, 120_000_000, time.UTC), "2024-05-06T07:08:09.12Z"},
		{time.Date(2024, 5, 6, 7, 8, 9, 1, time.UTC), "2024-05-06T07:08:09.000000001Z"},
	} {
		if got := FormatTime(tc.t); got != tc.want {
			t.Errorf("FormatTime(%v) = %s, want %s", tc.t, got, tc.want)
		}
	}
}

func TestValidOIDAndActorID(t *testing.T) {
	for s, want := range map[string]bool{
		"sha256:" + strings.Repeat("0a", 32):        true,
		"sha256:" + strings.Repeat("0A", 32):        false,
		"sha256:" + strings.Repeat("0a", 31):        false,
		"SHA256:" + strings.Repeat("0a", 32):        false,
		"sha256:" + strings.Repeat("0a", 32) + "\n": false,
	} {
		if got := ValidOID(s); got != want {
			t.Errorf("ValidOID(%q) = %v, want %v", s, got, want)
		}
	}
	for s, want := range map[string]bool{
		"a": true, "agent-1": true, "a" + strings.Repeat("b", 63): true, "a" + strings.Repeat("b", 64): false,
		"": false, "-a": false, "1a": false, "A": false, "a_b": false, "a\n": false,
	} {
		if got := ValidActorID(s); got != want {
			t.Errorf("ValidActorID(%q) = %v, want %v", s, got, want)
		}
	}
}

func mustInstant(s string) Instant {
	i, err := ParseInstant(s)
	if err != nil {
		panic(err)
	}
	return i
}

// A time in an entry has one spelling: Parse refuses any other, even one
// naming the same instant.
func TestParseRefusesNonCanonicalTimes(t *testing.T) {
	entry, err := Encode(genesisEvent())
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"2024-05-06T09:08:09+02:00", "2024-05-06T07:08:09+00:00", "2024-05-06T07:08:09",
		"2024-05-06T07:08:09.120Z", "2024-05-06t07:08:09z", "", "0001-01-01T00:00:00Z",
	} {
		changed := bytes.Replace(entry, []byte(`"time":"`+testTime+`"`), []byte(`"time":"`+bad+`"`), 1)
		if bytes.Equal(changed, entry) {
			t.Fatal("the test did not change the entry")
		}
		if _, err := Parse(changed); err == nil || !strings.Contains(err.Error(), "time") {
			t.Errorf("time %q: Parse said %v", bad, err)
		}
	}
}

// BenchmarkParse measures what replay pays per entry: the strict parse,
// which re-encodes the event to check its canonical form.
func BenchmarkParse(b *testing.B) {
	entry, err := Encode(actionEvent(Mutate))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(entry); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHandwrittenIDChecks: the hand-written checks of event ids and actor
// ids accept exactly what their patterns describe.
func TestHandwrittenIDChecks(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	actor := regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	for _, s := range []string{"", "a", "agent-1", "Agent", "1agent", "a_b", "a-", strings.Repeat("a", 64), strings.Repeat("a", 65),
		"019a5c3e-0000-7000-8000-000000000001", "019A5C3E-0000-7000-8000-000000000001", "019a5c3e-0000-7000-8000-00000000001",
		"019a5c3e00000-7000-8000-000000000001", "019a5c3e-0000-7000-8000-00000000000g", "root", "kernel", "é"} {
		if got, want := validUUID(s), uuid.MatchString(s); got != want {
			t.Errorf("validUUID(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := ValidActorID(s), actor.MatchString(s); got != want {
			t.Errorf("ValidActorID(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}

// TestCommonKindsEncodeAsWritten: an action's encoding is canonical as
// json writes it (its structs are in member order), so Encode takes the
// fast path for the most common kind.
func TestCommonKindsEncodeAsWritten(t *testing.T) {
	ev := actionEvent(Mutate)
	ev.Action.Envelope = "env-1"
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !isCanonical(raw) {
		t.Fatalf("an action event does not encode canonically as written: %s", raw)
	}
}

// TestHoldReason_ApprovalAsRejection: an action that commits an approved
// hold may carry the approver's reason, under the rule every hold reason
// follows (at most 2048 bytes of UTF-8); one without stays valid, as
// entries written before approvals carried a reason have none.
func TestHoldReason_ApprovalAsRejection(t *testing.T) {
	approval := func(reason string) *Event {
		e := actionEvent(Mutate)
		e.Hold = &Hold{ID: "hold-0123456789abcdef", Decision: HoldApprove, AnsweredBy: "alice", Reason: reason}
		return e
	}
	rejection := func(reason string) *Event {
		return &Event{V: Version, ID: actionID, Time: mustInstant(testTime), Kind: KindHoldAnswered, Actor: "alice",
			Hold: &Hold{ID: "hold-0123456789abcdef", Decision: HoldReject, AnsweredBy: "alice", Settled: 3, Reason: reason}}
	}
	for _, reason := range []string{"", "checked with the sender", strings.Repeat("é", 1024)} {
		for name, e := range map[string]*Event{"approval": approval(reason), "rejection": rejection(reason)} {
			entry, err := Encode(e)
			if err != nil {
				t.Fatalf("%s with a reason of %d bytes: %v", name, len(reason), err)
			}
			got, err := Parse(entry)
			if err != nil || got.Hold.Reason != reason {
				t.Fatalf("%s with a reason of %d bytes parses as %+v, %v", name, len(reason), got, err)
			}
			if reason != "" && !bytes.Contains(entry, []byte(`"reason":"`+reason+`"`)) {
				t.Fatalf("%s: the reason is not in the entry %s", name, entry)
			}
		}
	}
	for _, reason := range []string{strings.Repeat("x", 2049), "not \xff UTF-8"} {
		for name, e := range map[string]*Event{"approval": approval(reason), "rejection": rejection(reason)} {
			if _, err := Encode(e); err == nil || !strings.Contains(err.Error(), "hold reason must be at most 2048 bytes of UTF-8") {
				t.Errorf("%s with a reason of %d bytes: %v", name, len(reason), err)
			}
		}
	}
}
