"""Paths of the agent file system (seed 002, Virtual File System; FORMATS.md
"The agent file system"), as Annal's format/vfspath reads them: a
vfs://{agent}/{path} URI names a directory of an agent's tree, a file in
one of its writable directories, or a view of the log. Every URI is checked
here before anything is sent, with Go's words for what is wrong
(testvectors/vfs.json, "refused").

A write of a file is the action `mutate` (`create` under ipc/inbox/) on
the target vfs/{agent}/{path} naming the content's OID; a signed write
states that action (write_request)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

SCHEME = "vfs://"
TARGET_ROOT = "vfs/"
API_PREFIX = "/v1/vfs/"
MAX_NAME = 128
MAX_DEPTH = 8
MAX_PATH = 512
MAX_CONTENT = 1 << 20
RESERVED = "sessions"

# The tree's directories, and whether a file may be written in each.
_DIRS: Dict[str, bool] = {"mem": False, "mem/working": True, "mem/episodic": True, "mem/semantic": True,
                          "state": False, "state/checkpoints": True, "policy": False, "ipc": False,
                          "ipc/inbox": True, "ipc/outbox": False, "audit": False}
_DIR_NAMES = ("mem", "mem/working", "mem/episodic", "mem/semantic", "state", "state/checkpoints", "policy", "ipc",
              "ipc/inbox", "ipc/outbox", "audit")
VIEWS = ("policy/active.json", "policy/history.json", "audit/events.jsonl")
INBOX, OUTBOX = "ipc/inbox", "ipc/outbox"


class InvalidPathError(ValueError):
    """Not a path of the agent file system."""

    def __init__(self, why: str) -> None:
        super().__init__("not a path of the agent file system: " + why)


class ReadOnlyPathError(ValueError):
    """A path of the tree no write may change (a view, a directory, ipc/outbox/)."""

    def __init__(self, why: str) -> None:
        super().__init__("read-only: " + why)


def _quote(s: str) -> str:
    """Go's %q of a string of printable ASCII (what these messages quote)."""
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif " " <= c <= "~" or (ord(c) > 0x9f and c.isprintable()):
            out.append(c)
        elif ord(c) <= 0xff:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xffff else f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


def _quote_byte(b: int) -> str:
    """Go's %q of rune(b) for a byte b."""
    c = chr(b)
    if c in "'\\":
        return "'\\" + c + "'"
    if " " <= c <= "~" or (b > 0x9f and c.isprintable()):
        return "'" + c + "'"
    return f"'\\x{b:02x}'" if b < 0x80 else f"'\\u{b:04x}'"


def _clip(s: str) -> str:
    raw = s.encode("utf-8")
    return raw[:80].decode("utf-8", "replace") + "\u2026" if len(raw) > 80 else s


def _check_agent(agent: str) -> None:
    ok = 0 < len(agent) <= 64 and "a" <= agent[0] <= "z" and all(
        "a" <= c <= "z" or "0" <= c <= "9" or c == "-" for c in agent[1:])
    if not ok:
        raise InvalidPathError(f"agent {_quote(_clip(agent))} is not an actor id ([a-z][a-z0-9-]{{0,63}})")
    if agent == RESERVED:
        raise InvalidPathError(f"vfs://{RESERVED}/ holds the files of sessions, not an agent's tree")


def _check_segment(d: str, name: str, s: str) -> None:
    if s == "":
        raise InvalidPathError(f"{d}/{_clip(name)} has an empty segment")
    if s in (".", ".."):
        raise InvalidPathError(f"{d}/{_clip(name)} has a {_quote(s)} segment")
    raw = s.encode("utf-8")
    if len(raw) > MAX_NAME:
        raise InvalidPathError(f"a segment of {d}/ is {len(raw)} bytes, more than {MAX_NAME}")
    for b in raw:
        c = chr(b)
        if not ("a" <= c <= "z" or "A" <= c <= "Z" or "0" <= c <= "9" or c in "._-"):
            raise InvalidPathError(f"{d}/{_clip(name)} holds {_quote_byte(b)}; a name is made of A-Z a-z 0-9 . _ -")


def _check_name(d: str, name: str) -> None:
    if name == "":
        raise InvalidPathError(f"{d}/ needs a file name after it")
    segs = name.split("/")
    if len(segs) > MAX_DEPTH:
        raise InvalidPathError(f"{d}/{_clip(name)} has {len(segs)} segments under {d}/, more than {MAX_DEPTH}")
    for seg in segs:
        _check_segment(d, name, seg)


@dataclass(frozen=True)
class Path:
    """A path of an agent's tree: agent, and rel under it ("" for the root)."""

    agent: str
    rel: str = ""

    def _split(self) -> Tuple[str, str]:
        if self.rel in _DIRS or self.rel == "" or self.rel in VIEWS:
            return "", ""
        for d in _DIR_NAMES:
            if self.rel.startswith(d + "/") and (_DIRS[d] or d == OUTBOX):
                return d, self.rel[len(d) + 1:]
        return "", ""

    @property
    def dir(self) -> str:
        """The directory a file is in ("" for a directory or a view)."""
        return self._split()[0]

    @property
    def name(self) -> str:
        return self._split()[1]

    @property
    def is_dir(self) -> bool:
        return self.rel in _DIRS or self.rel == ""

    @property
    def is_view(self) -> bool:
        return self.rel in VIEWS

    def check_writable(self) -> None:
        """Raises ReadOnlyPathError for a path no write may change."""
        if self.is_view:
            raise ReadOnlyPathError(f"{self.uri} is a view of the log; it changes only as the log does")
        if self.is_dir:
            raise ReadOnlyPathError(f"{self.uri} is a directory; write a file in it")
        if self.dir == OUTBOX:
            raise ReadOnlyPathError(f"{self.uri} lists what {self.agent} wrote to other agents' {INBOX}; "
                                    f"write to vfs://<agent>/{INBOX}/<name> instead")

    @property
    def write_type(self) -> str:
        return "create" if self.dir == INBOX else "mutate"

    @property
    def uri(self) -> str:
        return f"{SCHEME}{self.agent}/{self.rel}"

    @property
    def target(self) -> str:
        return f"{TARGET_ROOT}{self.agent}/{self.rel}"

    @property
    def api_path(self) -> str:
        """The path of its route under annald's URL (no byte of it needs escaping)."""
        return f"v1/vfs/{self.agent}" + (f"/{self.rel}" if self.rel else "")

    def write_request(self, oid: str, envelope: str = "") -> Dict[str, str]:
        """The action a write of content oid is, as its signature states it."""
        req = {"type": self.write_type, "target": self.target, "payload_hash": oid}
        if envelope:
            req["envelope"] = envelope
        return req


def parse(agent: str, rel: str) -> Path:
    _check_agent(agent)
    p = Path(agent, rel)
    if rel == "" or rel in _DIRS or rel in VIEWS:
        return p
    if len(rel.encode("utf-8")) > MAX_PATH:
        raise InvalidPathError(f"path is {len(rel.encode('utf-8'))} bytes, more than {MAX_PATH}")
    d, name = p._split()
    if d == "":
        raise InvalidPathError(f"{_quote(_clip(rel))} is not in one of the tree's directories "
                               f"({', '.join(_DIR_NAMES)})")
    _check_name(d, name)
    return p


def parse_uri(uri: str) -> Path:
    """Reads vfs://{agent}/{path} (a trailing "/" names the same directory)."""
    if not uri.startswith(SCHEME):
        raise InvalidPathError(f"{_quote(_clip(uri))} does not start with {SCHEME}")
    agent, _, rel = uri[len(SCHEME):].partition("/")
    return parse(agent, rel[:-1] if rel.endswith("/") else rel)


def parse_target(target: str) -> Optional[Path]:
    """The path a target vfs/{agent}/{path} names; None for another target."""
    if not target.startswith(TARGET_ROOT):
        return None
    agent, _, rel = target[len(TARGET_ROOT):].partition("/")
    return parse(agent, rel)
