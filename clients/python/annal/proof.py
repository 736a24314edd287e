"""c2sp.org/tlog-proof@v1 single-entry proofs and consistency proofs
between two signed checkpoints, verified offline with the log's key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from .errors import VerificationError
from .merkle import leaf_hash, verify_consistency as _verify_consistency, verify_inclusion
from .note import Checkpoint, Policy, VerifierKey, b64decode_strict, open_checkpoint, parse_decimal, parse_hash

HEADER = "c2sp.org/tlog-proof@v1"
MAX_PROOF_BYTES = 131072
MAX_HASHES = 64


@dataclass(frozen=True)
class TLogProof:
    index: int
    hashes: Tuple[bytes, ...]
    checkpoint: bytes  # the signed checkpoint, verbatim
    extra: Optional[bytes] = None  # opaque and unauthenticated: never trust it


@dataclass(frozen=True)
class ProofResult:
    index: int
    size: int
    root_hash: bytes
    checkpoint: Checkpoint


def parse_tlog_proof(data: "bytes | str") -> TLogProof:
    """Parses the tlog-proof layout strictly."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_PROOF_BYTES:
        raise VerificationError(f"tlog-proof is {len(raw)} bytes, more than {MAX_PROOF_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationError("proof format: tlog-proof is not UTF-8") from None
    if not text.startswith(HEADER + "\n"):
        raise VerificationError(f'proof format: tlog-proof does not start with the line "{HEADER}"')
    rest = text[len(HEADER) + 1:]
    extra: Optional[bytes] = None
    if rest.startswith("extra "):
        line, _, rest = rest.partition("\n")
        extra = b64decode_strict(line[len("extra "):], "proof format: tlog-proof extra")
    line, nl, rest = rest.partition("\n")
    if not nl or not line.startswith("index "):
        raise VerificationError("proof format: tlog-proof has no index line")
    index = parse_decimal(line[len("index "):], "proof format: tlog-proof index")
    hashes: List[bytes] = []
    while True:
        line, nl, rest = rest.partition("\n")
        if not nl:
            raise VerificationError("proof format: tlog-proof has no empty line before the checkpoint")
        if line == "":
            break
        if len(hashes) == MAX_HASHES:
            raise VerificationError(f"proof format: tlog-proof has more than {MAX_HASHES} hashes")
        hashes.append(parse_hash(line, f"proof format: tlog-proof hash {len(hashes) + 1}"))
    return TLogProof(index, tuple(hashes), rest.encode("utf-8"), extra)


def _key(k: "VerifierKey | str") -> VerifierKey:
    return VerifierKey.parse(k) if isinstance(k, str) else k


def verify_proof(entry: bytes, proof: "bytes | str", log_key: "VerifierKey | str | Policy") -> ProofResult:
    """Checks that entry is in the log at the proof's index, under a
    checkpoint the log's key signed (and, given a Policy, that a quorum of
    its witnesses cosigned)."""
    p = parse_tlog_proof(proof)
    try:
        if isinstance(log_key, Policy):
            cp, _ = log_key.open_checkpoint(p.checkpoint)
        else:
            cp, _ = open_checkpoint(p.checkpoint, _key(log_key))
    except VerificationError as e:
        raise VerificationError(f"checkpoint signature: {e}") from None
    if p.index >= cp.size:
        raise VerificationError(f"index: index {p.index} is not inside the checkpoint's {cp.size} entries")
    verify_inclusion(p.index, cp.size, leaf_hash(entry), p.hashes, cp.root_hash)
    return ProofResult(p.index, cp.size, cp.root_hash, cp)


def parse_hash_lines(data: "bytes | str") -> List[bytes]:
    """A consistency proof: one base64 hash per line, each ending in LF."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise VerificationError("consistency proof is not UTF-8") from None
    if text == "":
        return []
    if not text.endswith("\n"):
        raise VerificationError("consistency proof: last line does not end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) > MAX_HASHES:
        raise VerificationError(f"consistency proof: more than {MAX_HASHES} hashes")
    return [parse_hash(line, f"consistency proof hash {i + 1}") for i, line in enumerate(lines)]


def verify_consistency(checkpoint1: "bytes | str", checkpoint2: "bytes | str", proof: "bytes | str",
                       log_key: "VerifierKey | str") -> Tuple[Checkpoint, Checkpoint]:
    """Checks that the log's tree in checkpoint1 is a prefix of the tree in checkpoint2."""
    key = _key(log_key)
    cp1, _ = open_checkpoint(checkpoint1, key)
    cp2, _ = open_checkpoint(checkpoint2, key)
    _verify_consistency(cp1.size, cp2.size, parse_hash_lines(proof), cp1.root_hash, cp2.root_hash)
    return cp1, cp2
