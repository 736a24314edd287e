// Package matrixbridge is the overseer's remote control over a messaging
// protocol (seed 000 §5.1): a Matrix bot that posts every pending hold to a
// room and lets the room's humans answer it, see a dashboard, read the
// history and an agent's status, and freeze, stop or kill an agent; it also
// posts witness problems and equivocation evidence as alerts.
//
// The bridge is a client of annald's HTTP API (package client) and nothing
// more: it holds no kernel state and writes nothing but what a person asks
// for. Its contract:
//
//   - Every request made on a person's behalf carries that person's own
//     credential, found through the operator's mapping of Matrix user ids to
//     Annal humans (Config.Users), so the log names who answered, never the
//     bridge. A Matrix user the mapping does not name gets a refusal in the
//     room and changes nothing.
//   - The bridge's own credential (a human's, given to Run) only reads:
//     pending holds and the log's health.
//   - freeze, stop and kill are carried out only after the same person
//     confirms them with the code the bridge answered ("!confirm CODE"),
//     within ConfirmWithin.
//   - Only text messages in the configured room count; messages sent before
//     the bridge started are not read (a command typed while it was down is
//     never carried out late). The room must not be end-to-end encrypted:
//     the bridge does not decrypt.
//
// The Matrix user ids come from the homeserver: the bridge trusts it to
// say who sent a message, so the room belongs on a homeserver the operator
// trusts.
package matrixbridge
