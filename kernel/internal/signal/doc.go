// Package signal is the Agent OS signal table and the kernel's rules for
// delivering a signal to an agent, as pure functions.
//
// # Signals
//
// The values are the seed's:
//
//	signal     value  maskable
//	SIGSTOP    1      yes       pause
//	SIGCONT    2      yes       resume
//	SIGINT     3      yes       graceful interrupt
//	SIGKILL    4      no        immediate termination
//	SIGTERM    5      yes       request shutdown
//	SIGPOLICY  8      no        policy violation
//	SIGTRUST   9      no        trust violation
//
// No other value is a signal. Parse accepts a name with or without its
// "SIG" prefix, in any case ("SIGSTOP", "sigstop", "stop", "Stop"), and
// MUST refuse anything else: other values, surrounding spaces, numbers.
// String gives the canonical name, "SIGSTOP".
//
// # Masks
//
// A Mask is the set of maskable signals an agent handles itself: bit s is
// set for signal s. With MUST refuse a signal that is not maskable, so a
// Mask built with With never holds SIGKILL, SIGPOLICY or SIGTRUST. A Mask is
// written in JSON as the list of its signals' canonical names, sorted by
// name: ["SIGINT","SIGSTOP"]; the empty mask is []. UnmarshalJSON is strict:
// it MUST refuse anything but an array of canonical names (no "stop", no
// numbers, no null), a name given twice, and a signal that is not maskable.
// The names may come in any order.
//
// # Delivery
//
// Deliver(state, mask, s) says what the kernel does with signal s sent to
// an agent in state with mask, and the agent's state afterwards:
//
//   - a terminated agent takes no signal: ErrTerminated;
//   - a signal that is not maskable terminates the agent, whatever its mask
//     (the seed's SignalDispatcher does the same before looking at handlers);
//   - a maskable signal in the mask is queued: it goes to the agent's own
//     handler and the kernel leaves the agent's state as it is;
//   - otherwise SIGSTOP stops a running agent (an agent already stopped:
//     none), SIGCONT continues a stopped agent (a running one: none),
//     SIGTERM terminates, and SIGINT is queued even when not masked. An
//     interrupt is a notice to the agent that it should wind down what it is
//     doing ("graceful interrupt", recovery "restart"); the kernel has no
//     graceful way to do that on the agent's behalf, so it delivers the
//     notice and changes no state. An agent that ignores SIGINT gets SIGTERM
//     or SIGKILL next.
//
// Deliver MUST refuse an unknown state, an unknown signal and a mask with a
// bit that is not a maskable signal, and changes nothing when it refuses.
// Everything here is pure and deterministic, so the kernel can fold signal
// events both live and when replaying its log.
package signal
