"""RFC 6962 Merkle tree hashes and proof verification (RFC 9162 §2.1.3.2
and §2.1.4.2 algorithms)."""

from __future__ import annotations

import hashlib
from typing import Sequence

from .errors import VerificationError


def leaf_hash(entry: bytes) -> bytes:
    """SHA-256(0x00 || entry)."""
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_of(leaves: Sequence[bytes]) -> bytes:
    """MTH(D[n]) over leaf hashes; SHA-256("") for no leaves."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return node_hash(root_of(leaves[:k]), root_of(leaves[k:]))


def root_from_inclusion(index: int, size: int, leaf: bytes, path: Sequence[bytes]) -> bytes:
    """The root the audit path of the leaf at index leads to in a tree of size."""
    if index >= size:
        raise VerificationError(f"index {index} is not inside a tree of {size} entries")
    fn, sn = index, size - 1
    r = leaf
    for p in path:
        if sn == 0:
            raise VerificationError("inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerificationError("inclusion proof is too short")
    return r


def verify_inclusion(index: int, size: int, leaf: bytes, path: Sequence[bytes], root: bytes) -> None:
    got = root_from_inclusion(index, size, leaf, path)
    if got != root:
        raise VerificationError(
            f"inclusion: entry with leaf hash {leaf.hex()} at index {index} does not lead to the root of {size} entries")


def verify_consistency(size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes) -> None:
    """Checks PROOF(size1, D[size2]) between the two roots."""
    if size1 > size2:
        raise VerificationError(f"consistency: size {size1} is larger than {size2}")
    if size1 == size2 or size1 == 0:
        if proof:
            raise VerificationError("consistency: proof must be empty")
        if size1 == size2 and root1 != root2:
            raise VerificationError("consistency: same size, different roots")
        return
    if not proof:
        raise VerificationError("consistency: empty proof")
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # size1 is a power of two: its root is the first node
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise VerificationError("consistency: proof is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerificationError("consistency: proof is too short")
    if fr != root1 or sr != root2:
        raise VerificationError(f"consistency: proof from {size1} to {size2} does not match the roots")
