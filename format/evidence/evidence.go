// Package evidence declares the equivocation evidence file,
// annal.dev/equivocation-evidence/v1: its name, its members and its size
// limit. The exact rules, what a reader MUST refuse and why the file proves
// that a log signed two histories, are in testvectors/FORMATS.md
// ("Equivocation evidence"); evidence.json beside it holds the known
// answers.
//
// Its contract:
//
//   - It is the one declaration of the format, shared by the writer (the
//     witness, which keeps a file when two checkpoints of a log contradict
//     each other) and the reader (verifier.VerifyEvidence, `annal-verify
//     evidence`). A change here is a change of the format: it MUST come with
//     a new Format name or with vectors that still pass unchanged.
//   - It declares; it does not check. A reader MUST parse a file strictly
//     with its own code (valid UTF-8, no duplicate or unknown member, at most
//     MaxSize bytes) and check its signatures and proof; nothing here
//     validates a value.
//   - It imports only the standard library, so the offline verifier may
//     import it without depending on any of the code it verifies (a test in
//     verifier/ enforces it).
package evidence

// Format names version 1 of the equivocation evidence file: the value of
// its "format" member.
const Format = "annal.dev/equivocation-evidence/v1"

// MaxSize bounds an evidence file, in bytes: two checkpoints of at most
// 16 KiB each and a consistency proof of at most 64 hashes, with room to
// spare.
const MaxSize = 48 << 10

// File is an equivocation evidence file: one JSON object of these members,
// in this order. Checkpoints holds two signed checkpoint notes of the log
// Origin, as the log served them, the smaller size first; LogKey is the
// log's verifier key, named Origin, whose signature both carry. When the
// sizes differ, PrefixRoot is the base64 root of the larger tree's first
// entries up to the smaller size, and ConsistencyProof the RFC 6962
// consistency proof (base64 hashes) from the smaller size to the larger;
// when the sizes are equal, both are absent and the roots differ.
type File struct {
	Format           string    `json:"format"`
	Origin           string    `json:"origin"`
	LogKey           string    `json:"log_key"`
	Checkpoints      [2]string `json:"checkpoints"`
	PrefixRoot       string    `json:"prefix_root,omitempty"`
	ConsistencyProof []string  `json:"consistency_proof,omitempty"`
	// Observations say who saw each checkpoint, for the record; they prove
	// nothing and a reader MUST NOT rely on them.
	Observations []Observation `json:"observations,omitempty"`
}

// Observation records who saw one of the checkpoints of a File, and when.
// Checkpoint is 0 or 1, an index into File.Checkpoints; At is an RFC 3339
// time in UTC.
type Observation struct {
	Checkpoint int    `json:"checkpoint"`
	By         string `json:"by"`
	At         string `json:"at"`
}
