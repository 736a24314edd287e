"""Signed requests (annal/signed-request/v1, FORMATS.md "Signed requests"):
an actor's Ed25519 signed-note key, the statement it signs for a request,
and the Annal-Signature header that carries the signature.

The statement is "annal/signed-request/v1\\n" || JCS({by, nonce, origin,
request: {method, path, body?}, time}); an action that seals its payload is
stated with its sealed commitment in place of payload, salt, seal and
subject, as the event will carry it."""

from __future__ import annotations

import base64
import copy
import hashlib
import os
from datetime import datetime, timezone
from typing import Any, Dict, Mapping, Optional

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .errors import VerificationError
from .jcs import canonicalize
from .note import ALG_ED25519, VerifierKey, b64decode_strict, check_key_name, key_id

STATEMENT_CONTEXT = b"annal/signed-request/v1\n"
SEAL_CONTEXT = b"annal/sealed-payload/v1\n"


class SigningKey:
    """An actor's Ed25519 request-signing key, named as a signed-note key."""

    def __init__(self, name: str, seed: bytes) -> None:
        check_key_name(name)
        if len(seed) != 32:
            raise ValueError("an Ed25519 seed is 32 bytes")
        self.name = name
        self._seed = seed
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        pub = self._key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.verifier = VerifierKey(name, key_id(name, ALG_ED25519, pub), ALG_ED25519, pub)

    @classmethod
    def generate(cls, name: str) -> "SigningKey":
        return cls(name, os.urandom(32))

    @classmethod
    def parse(cls, private_key: str) -> "SigningKey":
        """Reads PRIVATE+KEY+<name>+<key id>+<base64(0x01 || seed)>."""
        parts = private_key.strip().split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise ValueError("not a PRIVATE+KEY+<name>+<id>+<key> private key")
        raw = b64decode_strict(parts[4], "private key")
        if len(raw) != 33 or raw[0] != ALG_ED25519:
            raise ValueError("not an Ed25519 signed-note private key")
        k = cls(parts[2], raw[1:])
        if parts[3] != f"{k.verifier.key_id:08x}":
            raise ValueError("the private key's id does not match its key")
        return k

    @classmethod
    def load(cls, path: str) -> "SigningKey":
        """Reads a private key file as `annal keys generate FILE` writes it
        (what --signing-key and ANNAL_SIGNING_KEY_FILE name)."""
        with open(path, encoding="utf-8") as f:
            return cls.parse(f.read())

    @classmethod
    def generate_file(cls, path: str, name: str = "annal-signing-key") -> "SigningKey":
        """Makes a key as `annal keys generate FILE` does: the private key
        into path (mode 0600, never overwritten), the verifier key into the
        same name with .pub in place of its extension."""
        k = cls.generate(name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(k.private_key() + "\n")
            f.flush()
            os.fsync(f.fileno())
        with open(os.path.splitext(path)[0] + ".pub", "w", encoding="utf-8") as f:
            f.write(str(k.verifier) + "\n")
        return k

    def private_key(self) -> str:
        b64 = base64.b64encode(bytes([ALG_ED25519]) + self._seed).decode("ascii")
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id:08x}+{b64}"

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)


def seal_commitment(salt: bytes, payload: Any) -> str:
    """sha256:<hex of SHA-256("annal/sealed-payload/v1\\n" || salt || JCS(payload))>."""
    return "sha256:" + hashlib.sha256(SEAL_CONTEXT + salt + canonicalize(payload)).hexdigest()


def sealed_body(body: Mapping[str, Any]) -> Dict[str, Any]:
    """An action request as its signature states it: a sealed payload as its commitment."""
    out = dict(body)
    if not {"salt", "seal", "subject"} & out.keys():
        return out
    salt_b64, subject = out.get("salt"), out.get("subject")
    if not isinstance(salt_b64, str) or not isinstance(subject, str) or out.get("payload") is None:
        raise VerificationError("a signed request that seals its payload carries the payload, its subject and its salt")
    salt = base64.b64decode(salt_b64, validate=True)
    if len(salt) != 32:
        raise VerificationError("a seal's salt is 32 bytes")
    commitment = seal_commitment(salt, out["payload"])
    for k in ("payload", "salt", "seal", "subject"):
        out.pop(k, None)
    out["sealed"] = {"commitment": commitment, "subject": subject}
    return out


def signed_statement(origin: str, by: str, nonce: str, time: str, method: str, path: str,
                     body: Optional[Mapping[str, Any]] = None) -> bytes:
    """The bytes an actor signs for one request (path without the query)."""
    request: Dict[str, Any] = {"method": method, "path": path}
    if body is not None:
        b = copy.deepcopy(dict(body))
        request["body"] = sealed_body(b) if (method, path) == ("POST", "/v1/actions") else b
    return STATEMENT_CONTEXT + canonicalize({"by": by, "nonce": nonce, "origin": origin, "request": request,
                                             "time": time})


def signature_header(key: SigningKey, nonce: str, time: str, sig: bytes) -> str:
    return f"key={key.verifier.key_id:08x}, nonce={nonce}, time={time}, sig={base64.b64encode(sig).decode('ascii')}"


def new_nonce() -> str:
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")


def now_rfc3339() -> str:
    """RFC 3339 UTC with Z and no trailing zeros in the fraction."""
    t = datetime.now(timezone.utc)
    frac = f"{t.microsecond:06d}".rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"
