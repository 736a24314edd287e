"""Execute intents and results (rules version 3; FORMATS.md "Event
entries"), as the Go client's DecideIntent and RecordResult build them
(internal/execute): an intent is logged and decided before what it names
runs, and a result naming the intent completes it once it ran.

What ran is named by content ids (OIDs): "sha256:" and the lower-case hex
SHA-256 of the RFC 8785 bytes the canonical_* functions return, so that
anyone holding the call can recompute them in any language. Payloads are
built here and decided by the kernel: nothing here judges them.
testvectors/execute.json holds the known answers."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence

from .jcs import canonicalize

# The members an intent's description may not set: the kernel reads them.
RESERVED = ("phase", "input_oid", "intent", "output_oid", "artifact_hash", "exit_code", "output_bytes")


def oid_of(data: bytes) -> str:
    """The content id of bytes: "sha256:" and 64 lower-case hex digits."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_command(argv: Sequence[str], stdin_oid: str) -> bytes:
    """The input of a command `annal exec` runs: {"argv", "stdin": OID of its stdin}."""
    if not argv:
        raise ValueError("no command")
    return canonicalize({"argv": list(argv), "stdin": stdin_oid})


def command_oid(argv: Sequence[str], stdin: bytes = b"") -> str:
    return oid_of(canonical_command(argv, oid_of(stdin)))


def canonical_tool_call(server: str, tool: str, arguments: Any = None) -> bytes:
    """The input of an MCP tool call: {"arguments" (absent or None: {}), "server", "tool"}."""
    return canonicalize({"arguments": {} if arguments is None else arguments, "server": server, "tool": tool})


def tool_call_oid(server: str, tool: str, arguments: Any = None) -> str:
    return oid_of(canonical_tool_call(server, tool, arguments))


def canonical_tool_result(result: Mapping[str, Any]) -> bytes:
    """The output of an MCP tool call: the members the MCP schema defines
    for it — "content" (absent: []), "structuredContent" (unless absent or
    null) and "isError" (only when true) — so that transport details
    ("_meta", "resultType") never change its OID."""
    if not isinstance(result, Mapping):
        raise ValueError("a tool result is a JSON object")
    content = result.get("content")
    out: Dict[str, Any] = {"content": [] if content is None else content}
    if result.get("structuredContent") is not None:
        out["structuredContent"] = result["structuredContent"]
    is_error = result.get("isError")
    if is_error is not None and not isinstance(is_error, bool):
        raise ValueError("isError is not a boolean")
    if is_error:
        out["isError"] = True
    return canonicalize(out)


def tool_result_oid(result: Mapping[str, Any]) -> str:
    return oid_of(canonical_tool_result(result))


def intent_payload(input_oid: str, about: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The payload of an intent: {phase: "intent", input_oid, ...about};
    about describes what will run for the kernel's policies (the argv, the
    tool's arguments) and may not set a member the kernel reads."""
    p = dict(about or {})
    for k in RESERVED:
        if k in p:
            raise ValueError(f"intent: {k!r} is not a description member")
    p["phase"], p["input_oid"] = "intent", input_oid
    return p


@dataclass
class Intent:
    """An execute intent the kernel allowed: what its result names."""

    # The log index the result names: the intent's entry, or the approving
    # entry when a human approved a held intent.
    index: int
    target: str
    input_oid: str
    envelope: str = ""
    session: str = ""
    hold_id: str = ""  # the hold a human answered, if the intent was held


@dataclass
class Result:
    """What ran, completing an intent (§5.6 with "intent"); intent and
    input_oid are filled from the Intent by Client.record_result."""

    output_oid: str
    artifact_hash: str
    exit_code: int = 0
    output_bytes: int = 0
    about: Dict[str, Any] = field(default_factory=dict)  # e.g. {"stderr_oid": ...}
    intent: int = 0
    input_oid: str = ""

    def payload(self) -> Dict[str, Any]:
        if not -(1 << 31) <= self.exit_code < (1 << 31):
            raise ValueError("exit_code is a 32-bit integer")
        if not 0 <= self.output_bytes < (1 << 64) or not 0 <= self.intent < (1 << 64):
            raise ValueError("intent and output_bytes are unsigned 64-bit integers")
        p = dict(self.about)
        p.update(intent=self.intent, input_oid=self.input_oid, output_oid=self.output_oid,
                 artifact_hash=self.artifact_hash, exit_code=self.exit_code, output_bytes=self.output_bytes)
        return p
