"""C2SP signed notes (c2sp.org/signed-note), checkpoints
(c2sp.org/tlog-checkpoint) and cosignatures (c2sp.org/tlog-cosignature,
cosignature/v1), read as testvectors/FORMATS.md restricts them.

A note is opened with the keys a reader trusts: signatures by unknown
(name, key id) pairs are ignored, a signature by a known key that does not
verify refuses the whole note."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .errors import VerificationError

ALG_ED25519 = 0x01
ALG_COSIGNATURE_V1 = 0x04
ALG_MLDSA44 = 0x06  # c2sp.org/tlog-cosignature subtree/v1 signatures with ML-DSA-44
MLDSA44_PUBLIC_KEY_BYTES = 1312
MLDSA44_SIGNATURE_BYTES = 2420
MAX_CHECKPOINT_BYTES = 16384
_SIG_PREFIX = "\u2014 "
_DECIMAL = re.compile(r"^(0|[1-9][0-9]*)$")


def b64decode_strict(text: str, what: str = "value") -> bytes:
    """Decodes standard padded base64 with exactly one spelling: any other
    spelling of the same bytes (missing padding, non-zero padding bits,
    white space, URL alphabet) is refused."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise VerificationError(f"{what}: {text!r} is not standard base64") from e
    if base64.b64encode(raw).decode("ascii") != text:
        raise VerificationError(f"{what}: {text!r} is not standard base64")
    return raw


def parse_decimal(text: str, what: str) -> int:
    """Parses an unsigned 64-bit decimal with no sign and no leading zero."""
    if not _DECIMAL.match(text):
        if len(text) > 1 and text[0] == "0" and text.isdigit():
            raise VerificationError(f'{what}: number "{text}" has a leading zero')
        raise VerificationError(f'{what}: "{text}" is not a decimal number')
    n = int(text)
    if n >= 1 << 64:
        raise VerificationError(f'{what}: number "{text}" does not fit in 64 bits')
    return n


def parse_hash(text: str, what: str = "hash") -> bytes:
    raw = b64decode_strict(text, what)
    if len(raw) != 32:
        raise VerificationError(f"{what}: hash is {len(raw)} bytes, want 32")
    return raw


def check_key_name(name: str) -> None:
    """1 to 255 bytes of UTF-8, no '+', no Unicode space, no control character."""
    n = len(name.encode("utf-8"))
    if n == 0 or n > 255:
        raise VerificationError(f"key name {name!r} is not 1 to 255 bytes")
    for ch in name:
        if ch == "+" or ch.isspace() or unicodedata.category(ch) in ("Cc", "Zs", "Zl", "Zp"):
            raise VerificationError(f"key name {name!r} holds a '+', a space or a control character")


def key_id(name: str, alg: int, public_key: bytes) -> int:
    """The first 4 bytes, big-endian, of SHA-256(name || LF || alg || key)."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([alg]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


@dataclass(frozen=True)
class VerifierKey:
    """A verifier key <name>+<key id hex>+<base64(alg || public key)>, for
    Ed25519 notes (alg 0x01) or cosignature/v1 (alg 0x04)."""

    name: str
    key_id: int
    alg: int
    public_key: bytes

    @classmethod
    def parse(cls, text: str) -> "VerifierKey":
        parts = text.split("+", 2)
        if len(parts) != 3:
            raise VerificationError(f"verifier key {text!r} is not name+id+key")
        name, hid, b64 = parts
        check_key_name(name)
        if not re.fullmatch(r"[0-9a-f]{8}", hid):
            raise VerificationError(f"verifier key {text!r}: key id is not 8 lower-case hex digits")
        raw = b64decode_strict(b64, "verifier key")
        ed = len(raw) == 33 and raw[0] in (ALG_ED25519, ALG_COSIGNATURE_V1)
        if not ed and not (len(raw) == 1 + MLDSA44_PUBLIC_KEY_BYTES and raw[0] == ALG_MLDSA44):
            raise VerificationError(f"verifier key {text!r}: not an Ed25519, cosignature/v1 or ML-DSA-44 key")
        k = cls(name, int(hid, 16), raw[0], raw[1:])
        if key_id(name, k.alg, k.public_key) != k.key_id:
            raise VerificationError(f"verifier key {text!r}: key id does not match the key")
        return k

    def __str__(self) -> str:
        b64 = base64.b64encode(bytes([self.alg]) + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id:08x}+{b64}"

    def _ed25519(self) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(self.public_key)

    def verify(self, text: bytes, sig: bytes) -> Optional[int]:
        """Checks a note signature (after its 4-byte key id) over text.
        Returns the cosignature time for a cosignature/v1 key, None for a
        log key; raises VerificationError if it does not verify."""
        try:
            if self.alg == ALG_ED25519:
                if len(sig) != 64:
                    raise InvalidSignature()
                self._ed25519().verify(sig, text)
                return None
            if self.alg == ALG_MLDSA44:
                return self._verify_mldsa44(text, sig)
            if len(sig) != 72:
                raise InvalidSignature()
            t = int.from_bytes(sig[:8], "big")
            msg = b"cosignature/v1\ntime " + str(t).encode("ascii") + b"\n" + text
            self._ed25519().verify(sig[8:], msg)
            return t
        except InvalidSignature:
            raise VerificationError(f'checkpoint signature by "{self.name}" does not verify') from None


    def _verify_mldsa44(self, text: bytes, sig: bytes) -> int:
        # Imported here: cryptography has ML-DSA from version 47, with an
        # OpenSSL that has it; Ed25519 checks need neither.
        from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PublicKey

        if len(sig) != 8 + MLDSA44_SIGNATURE_BYTES:
            raise InvalidSignature()
        t = int.from_bytes(sig[:8], "big")
        cp = parse_checkpoint_text(text)
        MLDSA44PublicKey.from_public_bytes(self.public_key).verify(sig[8:], subtree_message(self.name, t, cp))
        return t


def subtree_message(cosigner: str, t: int, cp: "Checkpoint") -> bytes:
    """The message of a c2sp.org/tlog-cosignature subtree/v1 signature over
    the whole tree [0, size) of a checkpoint, at time t (TLS presentation)."""
    name, origin = cosigner.encode("utf-8"), cp.origin.encode("utf-8")
    if not 0 < len(name) < 256 or not 0 < len(origin) < 256:
        raise VerificationError("cosigner name and log origin are 1 to 255 bytes")
    return (b"subtree/v1\n\x00" + bytes([len(name)]) + name + t.to_bytes(8, "big") + bytes([len(origin)]) + origin
            + (0).to_bytes(8, "big") + cp.size.to_bytes(8, "big") + cp.root_hash)


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: int
    sig: bytes  # after the key id


@dataclass
class Note:
    """An opened note: its text and the signatures by trusted keys that verified."""

    text: bytes
    verified: List[VerifierKey] = field(default_factory=list)
    times: Dict[str, int] = field(default_factory=dict)  # cosigner name -> time


def parse_note(data: bytes) -> Tuple[bytes, List[Signature]]:
    """Splits a signed note into its text (final LF included) and signature lines."""
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationError("malformed note: not UTF-8") from None
    if any(unicodedata.category(c) == "Cc" and c != "\n" for c in s):
        raise VerificationError("malformed note: control character")
    split = s.rfind("\n\n")
    if split < 0 or not s.endswith("\n"):
        raise VerificationError("malformed note")
    text, rest = s[: split + 1], s[split + 2 :]
    sigs: List[Signature] = []
    lines = rest.split("\n")[:-1]
    if not lines:
        raise VerificationError("malformed note: no signatures")
    for line in lines:
        if not line.startswith(_SIG_PREFIX):
            raise VerificationError("malformed note: signature line")
        body = line[len(_SIG_PREFIX) :]
        name, sp, b64 = body.partition(" ")
        if not sp or " " in b64:
            raise VerificationError("malformed note: signature line")
        check_key_name(name)
        raw = b64decode_strict(b64, "signature")
        if len(raw) < 5:
            raise VerificationError("malformed note: signature too short")
        sigs.append(Signature(name, int.from_bytes(raw[:4], "big"), raw[4:]))
    return text.encode("utf-8"), sigs


def open_note(data: bytes, keys: Sequence[VerifierKey]) -> Note:
    """Opens a signed note with the trusted keys: unknown signers are
    ignored, a known signer's bad signature refuses the note."""
    text, sigs = parse_note(data)
    known = {(k.name, k.key_id): k for k in keys}
    note = Note(text)
    for s in sigs:
        k = known.get((s.name, s.key_id))
        if k is None:
            continue
        if k in note.verified:
            raise VerificationError(f'note has two signatures by "{k.name}"')
        t = k.verify(text, s.sig)
        note.verified.append(k)
        if t is not None:
            note.times[k.name] = t
    return note


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root_hash: bytes
    extensions: Tuple[str, ...] = ()

    def marshal(self) -> bytes:
        lines = [self.origin, str(self.size), base64.b64encode(self.root_hash).decode("ascii"), *self.extensions]
        return ("\n".join(lines) + "\n").encode("utf-8")


def parse_checkpoint_text(text: bytes) -> Checkpoint:
    lines = text.decode("utf-8").split("\n")
    if lines[-1] != "":
        raise VerificationError("checkpoint body does not end with a newline")
    lines = lines[:-1]
    if len(lines) < 3:
        raise VerificationError(f"checkpoint body has {len(lines)} lines, want at least 3 (origin, size, root hash)")
    origin = lines[0]
    check_key_name(origin)
    size = parse_decimal(lines[1], "checkpoint size")
    root = parse_hash(lines[2], "checkpoint root hash")
    for i, ext in enumerate(lines[3:], 1):
        if ext == "":
            raise VerificationError(f"checkpoint extension line {i} is empty")
    return Checkpoint(origin, size, root, tuple(lines[3:]))


def _log_key(key: "VerifierKey | str") -> VerifierKey:
    k = VerifierKey.parse(key) if isinstance(key, str) else key
    if k.alg != ALG_ED25519:
        raise VerificationError(f'log key "{k.name}" is not an Ed25519 key')
    return k


def open_checkpoint(data: "bytes | str", log_key: "VerifierKey | str",
                    cosigners: Sequence[VerifierKey] = ()) -> Tuple[Checkpoint, Note]:
    """Opens a signed checkpoint: the log key must have signed it, its origin
    must be the log key's name, and its body must be canonical."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    key = _log_key(log_key)
    if len(raw) > MAX_CHECKPOINT_BYTES:
        raise VerificationError(f"checkpoint is {len(raw)} bytes, more than {MAX_CHECKPOINT_BYTES}")
    try:
        note = open_note(raw, [key, *cosigners])
    except VerificationError as e:
        if "malformed note" in str(e):
            raise VerificationError(f"checkpoint is not a well-formed signed note: {e}") from None
        raise
    if key not in note.verified:
        raise VerificationError(f'checkpoint has no signature by log key "{key.name}"')
    cp = parse_checkpoint_text(note.text)
    if cp.origin != key.name:
        raise VerificationError(f'checkpoint origin "{cp.origin}" is not the log key\'s name "{key.name}"')
    return cp, note


def cosignature_message(checkpoint_text: bytes, t: int) -> bytes:
    return b"cosignature/v1\ntime " + str(t).encode("ascii") + b"\n" + checkpoint_text


@dataclass(frozen=True)
class Policy:
    """A c2sp.org/tlog-policy: the log's key, named witnesses (cosignature/v1
    keys) and groups, and the quorum (a witness or group name, or "none").
    URLs after keys are allowed and ignored. A witness is named by its
    cosignature/v1 (Ed25519) or its ML-DSA-44 key."""

    log: VerifierKey
    witnesses: Dict[str, VerifierKey]
    groups: Dict[str, Tuple[int, Tuple[str, ...]]]
    quorum: str

    @classmethod
    def parse(cls, text: str) -> "Policy":
        log: Optional[VerifierKey] = None
        witnesses: Dict[str, VerifierKey] = {}
        groups: Dict[str, Tuple[int, Tuple[str, ...]]] = {}
        quorum: Optional[str] = None
        for line in text.split("\n"):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            kw, args = words[0], words[1:]
            if kw == "log" and len(args) >= 1 and log is None:
                log = _log_key(args[0])
            elif kw == "witness" and len(args) in (2, 3) and args[0] not in witnesses and args[0] not in groups:
                k = VerifierKey.parse(args[1])
                if k.alg not in (ALG_COSIGNATURE_V1, ALG_MLDSA44):
                    raise VerificationError(f"witness {args[0]}: not a cosignature/v1 or ML-DSA-44 key")
                witnesses[args[0]] = k
            elif kw == "group" and len(args) >= 3 and args[0] not in witnesses and args[0] not in groups:
                members = tuple(args[2:])
                n = len(members) if args[1] == "all" else (1 if args[1] == "any" else parse_decimal(args[1], "group threshold"))
                for m in members:
                    if m not in witnesses and m not in groups:
                        raise VerificationError(f"group {args[0]}: unknown member {m}")
                if n < 1 or n > len(members):
                    raise VerificationError(f"group {args[0]}: threshold {n} out of range")
                groups[args[0]] = (n, members)
            elif kw == "quorum" and len(args) == 1 and quorum is None:
                quorum = args[0]
            else:
                raise VerificationError(f"policy: cannot read line {line!r}")
        if log is None or quorum is None:
            raise VerificationError("policy: needs a log line and a quorum line")
        if quorum != "none" and quorum not in witnesses and quorum not in groups:
            raise VerificationError(f"policy: quorum {quorum} is not a witness or group")
        return cls(log, witnesses, groups, quorum)

    def _met(self, name: str, signed: Set[str]) -> bool:
        if name in self.witnesses:
            return name in signed
        n, members = self.groups[name]
        return sum(self._met(m, signed) for m in members) >= n

    def open_checkpoint(self, data: "bytes | str") -> Tuple[Checkpoint, List[str]]:
        """Opens a checkpoint under the policy; returns it and the names of
        the witnesses whose cosignatures verified, in the policy's order."""
        cp, note = open_checkpoint(data, self.log, list(self.witnesses.values()))
        signed = {n for n, k in self.witnesses.items() if k in note.verified}
        cosigners = [n for n in self.witnesses if n in signed]
        if self.quorum != "none" and not self._met(self.quorum, signed):
            raise VerificationError(
                f'policy: the checkpoint\'s cosignatures ({",".join(cosigners)}) do not meet the quorum "{self.quorum}"')
        return cp, cosigners
