package event

import "github.com/annal-dev/annal/internal/strictjson"

// MaxJSONDepth bounds the nesting of objects and arrays in a caller's JSON.
const MaxJSONDepth = strictjson.MaxDepth

// CheckJSON checks that data is one JSON value that RFC 8785 can canonicalise
// without changing its meaning: see strictjson.Check for what it refuses.
func CheckJSON(data []byte) error { return strictjson.Check(data) }

func checkJSON(data []byte, maxDepth int) error { return strictjson.CheckDepth(data, maxDepth) }
