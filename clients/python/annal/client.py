"""A small HTTP client of annald (urllib, standard library only): submit an
action, get its receipt, fetch the entry and its tlog-proof, and verify
them offline against a log key the caller trusts.

Every answer of status 300 or more raises an APIError subclass carrying
annald's JSON error body. Requests refused without effect (429, 503, or
marked retryable) are sent again up to `attempts` times, waiting as the
answer's Retry-After says; an answer whose outcome is unknown is never sent
again (the entry may be logged)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from .errors import APIError, ConflictError, DeniedError, NotFoundError, VerificationError
from .merkle import leaf_hash
from .note import Policy, VerifierKey, open_checkpoint
from .proof import ProofResult, verify_consistency, verify_proof
from .signing import SigningKey, new_nonce, now_rfc3339, signature_header, signed_statement

MAX_RESPONSE_BODY = 1 << 20
JSON = Dict[str, Any]


def _error(status: int, raw: bytes, retry_after: Optional[str]) -> APIError:
    message = raw.decode("utf-8", "replace").strip()
    fields: Dict[str, Any] = {}
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]:
        message = body["error"]
        for k in ("stage", "gate", "reason", "signal", "trace_id"):
            if isinstance(body.get(k), str):
                fields[k] = body[k]
        di = body.get("denial_index")
        if isinstance(di, int) and not isinstance(di, bool) and di >= 0:
            fields["denial_index"] = di
        for k in ("outcome_unknown", "retryable", "stopped"):
            fields[k] = body.get(k) is True
    if retry_after is not None and retry_after.isdigit():
        fields["retry_after"] = float(retry_after)
    cls = APIError
    if fields.get("stage") or fields.get("gate"):
        cls = DeniedError
    elif status == 404:
        cls = NotFoundError
    elif status == 409:
        cls = ConflictError
    return cls(status, message, **fields)


class Client:
    """One actor's client of one annald."""

    def __init__(self, base_url: str, credential: str = "", *, attempts: int = 1, first_wait: float = 0.25,
                 max_wait: float = 5.0, timeout: float = 60.0, signing_key: Optional[SigningKey] = None) -> None:
        """signing_key, if given, signs every request that may change
        something (not GET, not blobs) as annal/signed-request/v1, for the
        log's origin and the client's actor, read once from annald."""
        self.base_url = base_url.rstrip("/") + "/"
        self.credential = credential
        self.signing_key = signing_key
        self._identity: Optional[Tuple[str, str]] = None
        self.attempts = attempts
        self.first_wait = first_wait
        self.max_wait = max_wait
        self.timeout = timeout

    def _signature(self, method: str, url: str, body: Optional[Any]) -> str:
        assert self.signing_key is not None
        if self._identity is None:
            self._identity = (self.info()["origin"], self._json("GET", "v1/whoami")["id"])
        origin, by = self._identity
        nonce, at = new_nonce(), now_rfc3339()
        stmt = signed_statement(origin, by, nonce, at, method, urllib.parse.urlsplit(url).path, body)
        return signature_header(self.signing_key, nonce, at, self.signing_key.sign(stmt))

    def _once(self, method: str, path: str, body: Optional[bytes], doc: Optional[Any] = None) -> bytes:
        url = self.base_url + path.lstrip("/")
        req = urllib.request.Request(url, data=body, method=method)
        if body is not None:
            req.add_header("Content-Type", "application/json")
        if self.credential:
            req.add_header("Authorization", "Bearer " + self.credential)
        if self.signing_key is not None and method not in ("GET", "HEAD") and not path.startswith("v1/blobs"):
            req.add_header("Annal-Signature", self._signature(method, url, doc))
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw: bytes = resp.read(MAX_RESPONSE_BODY + 1)
        except urllib.error.HTTPError as e:
            raise _error(e.code, e.read(MAX_RESPONSE_BODY), e.headers.get("Retry-After")) from None
        if len(raw) > MAX_RESPONSE_BODY:
            raise APIError(0, f"{method} {path}: answer is larger than {MAX_RESPONSE_BODY} bytes")
        return raw

    def request(self, method: str, path: str, body: Optional[Any] = None) -> bytes:
        """Sends one request (body as JSON), retrying as the class says."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        wait = self.first_wait
        attempt = 1
        while True:
            try:
                return self._once(method, path, data, body)
            except APIError as e:
                again = (e.status in (429, 503) or e.retryable) and not e.outcome_unknown and not e.stopped
                if not again or attempt >= self.attempts:
                    raise
                time.sleep(min(max(wait, e.retry_after or 0.0), self.max_wait))
                wait *= 2
                attempt += 1

    def _json(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        raw = self.request(method, path, body)
        try:
            return json.loads(raw)
        except ValueError:
            raise APIError(0, f"{method} {path}: answer is not JSON") from None

    def info(self) -> JSON:
        """The log's origin, verifier key and size (GET /v1/info)."""
        out: JSON = self._json("GET", "v1/info")
        return out

    def submit(self, type: str, target: str, payload: Optional[Any] = None, *, envelope: str = "",
               wait_published: bool = False, **fields: Any) -> JSON:
        """Submits an action and returns its receipt: status "committed",
        or "held" with hold_id when a human must answer. With
        wait_published the receipt also holds the checkpoint and proof."""
        req: JSON = {"type": type, "target": target, **fields}
        if payload is not None:
            req["payload"] = payload
        if envelope:
            req["envelope"] = envelope
        path = "v1/actions?wait=published" if wait_published else "v1/actions"
        out: JSON = self._json("POST", path, req)
        return out

    def create_agent(self, name: str, purpose: str, **fields: Any) -> JSON:
        out: JSON = self._json("POST", "v1/agents", {"name": name, "purpose": purpose, **fields})
        return out

    def issue_envelope(self, holder: str, budget: int, grants: List[JSON], **fields: Any) -> JSON:
        out: JSON = self._json("POST", "v1/envelopes", {"holder": holder, "budget": budget, "grants": grants, **fields})
        return out

    def hold(self, hold_id: str) -> JSON:
        out: JSON = self._json("GET", "v1/holds/" + urllib.parse.quote(hold_id, safe=""))
        return out

    def answer_hold(self, hold_id: str, decision: str, reason: str = "") -> JSON:
        path = f"v1/holds/{urllib.parse.quote(hold_id, safe='')}/{urllib.parse.quote(decision, safe='')}"
        out: JSON = self._json("POST", path, {"reason": reason} if reason else {})
        return out

    def wait_hold(self, hold_id: str, timeout: float = 300.0, poll: float = 0.2) -> JSON:
        """Polls a hold until it is no longer pending."""
        deadline = time.monotonic() + timeout
        while True:
            h = self.hold(hold_id)
            if h.get("status") != "pending" or time.monotonic() >= deadline:
                return h
            time.sleep(poll)

    def event(self, index: int) -> bytes:
        """The exact entry bytes at index (GET /v1/events/<index>)."""
        return self.request("GET", f"v1/events/{int(index)}")

    def checkpoint(self) -> bytes:
        return self.request("GET", "checkpoint")

    def proof(self, index: int) -> bytes:
        """The tlog-proof of index; ConflictError while no checkpoint covers it."""
        return self.request("GET", f"v1/proof/{int(index)}")

    def wait_proof(self, index: int, timeout: float = 60.0, poll: float = 0.05) -> bytes:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.proof(index)
            except ConflictError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(poll)

    def consistency(self, old: int, new: int) -> bytes:
        return self.request("GET", f"v1/proof/consistency?old={int(old)}&new={int(new)}")

    def verify_grew(self, old_checkpoint: "bytes | str", trusted: Union[VerifierKey, str, Policy]) -> bytes:
        """Fetches the latest checkpoint and the consistency proof from
        old_checkpoint to it, and checks offline that the log only grew.
        Returns the new checkpoint, to keep for the next check."""
        key = trusted.log if isinstance(trusted, Policy) else trusted
        old, _ = open_checkpoint(old_checkpoint, key)
        new_raw = self.checkpoint()
        if isinstance(trusted, Policy):
            trusted.open_checkpoint(new_raw)
        new, _ = open_checkpoint(new_raw, key)
        proof = self.consistency(old.size, new.size) if 0 < old.size < new.size else b""
        verify_consistency(old_checkpoint, new_raw, proof, key)
        return new_raw

    def verify_receipt(self, receipt: Mapping[str, Any], trusted: Union[VerifierKey, str, Policy],
                       timeout: float = 60.0) -> ProofResult:
        """Fetches the receipt's entry and its proof and checks them offline
        against the trusted log key (or policy), never a key the server
        names: the entry's leaf hash must be the receipt's, and the proof
        must put it at the receipt's index."""
        index = int(receipt["index"])
        entry = self.event(index)
        if leaf_hash(entry).hex() != receipt.get("leaf_hash"):
            raise VerificationError(f"entry {index} does not have the receipt's leaf hash")
        proof = receipt.get("proof") or self.wait_proof(index, timeout)
        res = verify_proof(entry, proof, trusted)
        if res.index != index:
            raise VerificationError(f"proof is for index {res.index}, the receipt says {index}")
        return res
