// Package server is the HTTP face of the kernel: the API and the console.
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
// serves Prometheus text. GET /v1/events (and /stream) is the history,
// GET /v1/health the log's and its witnesses' health, /v1/blobs the bytes
// behind OIDs (KeepBlobs).
//
// Every route is one row of one table (routes.go): its pattern, its
// handler, and whether its answer is one record written whole, with the
// longest body it reads. Buffered reads that table, through a mux of the
// same patterns, for a front that serves those requests on its own path
// (annald's internal/fastpost).
//
// At /ui/ it serves the overseer console, embedded (console.go): a person
// signs in with a credential and gets a session cookie that authenticates
// the same /v1 API under the same rules, with a CSRF token on every
// request that changes state; the pages build no HTML from strings and run
// under a CSP that requires Trusted Types.
package server
