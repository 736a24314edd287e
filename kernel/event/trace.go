package event

// Trace ids (testvectors/FORMATS.md, "Trace ids"). An event may carry, in
// its top-level member "trace_id", the W3C Trace Context trace id of the
// request that led to it: the caller's own, from its traceparent header,
// or the one the kernel's tracing gave the request. It lets an agent find
// the event its traced work led to, and its trace find the event. It is
// what the kernel was told, not something the caller signed: a request
// signature does not cover it.

// ValidTraceID reports whether s is a W3C trace id as events carry it:
// 32 lower-case hex digits, not all zeros (an all-zero trace id is
// invalid in W3C Trace Context).
func ValidTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	zero := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
		zero = zero && c == '0'
	}
	return !zero
}
