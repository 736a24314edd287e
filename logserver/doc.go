// Package logserver is the HTTP face of the kernel.
//
// At the server root it serves the log as c2sp.org/tlog-tiles: /checkpoint
// (text/plain, not cached beyond a second), /tile/<L>/<N>[.p/<W>] and
// /tile/entries/<N>[.p/<W>] (application/octet-stream; full tiles are
// immutable). Only the canonical path of a tile is served, read from the
// Tessera POSIX tree; Tessera's private .state folder is never reachable.
//
// Under /v1 it serves the kernel's API: POST /v1/actions and /v1/agents
// (authenticated with "Authorization: Bearer <credential>"), GET /v1/info,
// /v1/events/<index>, /v1/proof/<index>, /v1/proof/consistency; the
// governance API (actors, envelopes, holds), the execution control API
// (rings, descriptors, elevations, sessions and their delta chains, kill,
// quarantine, signals, sagas, policies: control.go) and audit bundles
// (GET /v1/bundle, for humans). Every body has a size limit, every JSON
// body is parsed strictly, and a refused request changes nothing; an error
// names the stage, the gate and the rule (429 for a rate limit). /metrics
// serves Prometheus text.
package logserver
