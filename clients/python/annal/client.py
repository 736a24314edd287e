"""A small HTTP client of annald (http.client and urllib, standard library only), with the
Go client's surface (client/*.go): submit an action, get its receipt, fetch
the entry and its tlog-proof and verify them offline against a log key the
caller trusts; execute intents and results; actors, budget, envelopes and
holds; the history and its live stream; blobs; the agent file system;
sealed payloads; signed requests.

Every answer of status 300 or more raises an APIError subclass carrying
annald's JSON error body. Requests refused without effect (429, 503, or
marked retryable) are sent again up to `attempts` times, waiting as the
answer's Retry-After says; an answer whose outcome is unknown is never sent
again (the entry may be logged)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import select
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Generator, Iterator, List, Mapping, Optional, Tuple, Union

from .errors import (APIError, ConflictError, DeniedError, HoldPendingError, HoldRefusedError, NotFoundError,
                     VerificationError)
from .execute import Intent, Result, intent_payload, oid_of
from .merkle import leaf_hash
from .note import Policy, VerifierKey, open_checkpoint
from .proof import ProofResult, verify_consistency, verify_proof
from .signing import SigningKey, new_nonce, now_rfc3339, signature_header, signed_statement
from .vfspath import MAX_CONTENT, parse_uri

# What the client reads from any answer but a blob's or a file's, which
# MAX_BLOB_BODY bounds.
MAX_RESPONSE_BODY = 1 << 20
MAX_BLOB_BODY = 64 << 20
LIST_PAGE_SIZE = 200  # the page the client asks list endpoints for (the Go client's listPageSize)
MAX_LIST_PAGES = 10_000
_NEXT_LINK = re.compile(r'<([^>]*)>\s*;\s*rel="?next"?')
JSON = Dict[str, Any]

# The annal CLI's retry policy (client.DefaultRetry): Client(url, credential, **CLI_RETRY).
CLI_RETRY: Dict[str, Any] = {"attempts": 6, "first_wait": 0.25, "max_wait": 5.0}

# The filters and paging parameters of GET /v1/events (the stream takes
# the filters and cursor).
HISTORY_FILTERS = ("actor", "envelope", "session", "kind", "type", "outcome", "target", "since", "until", "trace_id")
HISTORY_PARAMS = HISTORY_FILTERS + ("order", "cursor", "limit")

# (method, path, body) a signature states in place of the request's own.
SignedForm = Tuple[str, str, Optional[Any]]


def _error(status: int, raw: bytes, retry_after: Optional[str]) -> APIError:
    message = raw.decode("utf-8", "replace").strip()
    fields: Dict[str, Any] = {}
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
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
    if retry_after is not None and re.fullmatch(r"[0-9]{1,9}", retry_after.strip()):
        fields["retry_after"] = float(retry_after)
    cls = APIError
    if fields.get("stage") or fields.get("gate"):
        cls = DeniedError
    elif status == 404:
        cls = NotFoundError
    elif status == 409:
        cls = ConflictError
    return cls(status, message, **fields)


def _retryable(e: APIError) -> bool:
    """Whether the kernel did nothing and asks to be asked again: 429, 503
    or an answer marked retryable, never one whose outcome is unknown (the
    entry may be logged) nor a stopped kernel's."""
    return (e.status in (429, 503) or e.retryable) and not e.outcome_unknown and not e.stopped


class _KeptConnection:
    """One HTTP/1.1 connection to annald, kept for the next request of the
    thread that opened it. urllib opens a connection for every request
    (and asks the server to close it): a sequential agent's submit took
    p50 580-660 µs that way on loopback. A request is written in one send
    (http.client sends the header and the body apart, which cost about 40
    µs a request here) and its answer read by http.client's HTTPResponse.
    The connection is reused only once its answer was read to the end,
    while it has been idle under IDLE seconds, and when the server has
    neither closed it nor sent anything unasked; a request whose kept
    connection died under it is sent again on a new one only when nothing
    of it could be sent or it is a GET (or HEAD): a POST the server may
    have read is never sent twice."""

    IDLE = 60.0  # annald closes an idle connection after 120 s (--idle-timeout)

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.host_header = (f"[{host}]" if ":" in host else host) + ("" if port == 80 else f":{port}")
        self.sock: Optional[socket.socket] = None
        self.used = 0.0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __del__(self) -> None:  # a thread's kept connection goes with the thread, or with its client
        self.close()

    def _reusable(self) -> bool:
        if self.sock is None or time.monotonic() - self.used >= self.IDLE:
            return False
        try:  # readable while idle: closed by the server, or something unasked
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def request_bytes(self, method: str, target: str, headers: Dict[str, str], body: Optional[bytes]) -> bytes:
        """The request as it is sent; a method, target or header that
        would break its framing is refused, as http.client refuses it."""
        if not _TOKEN.fullmatch(method) or not _TARGET.fullmatch(target):
            raise ValueError(f"annal: {method!r} {target!r} cannot be sent as an HTTP request line")
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}", "Accept-Encoding: identity"]
        for k, v in headers.items():
            if not _TOKEN.fullmatch(k) or _BAD_VALUE.search(v):
                raise ValueError(f"annal: header {k!r} cannot be sent")
            lines.append(f"{k}: {v}")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")

    def exchange(self, method: str, target: str, body: Optional[bytes], headers: Dict[str, str],
                 timeout: float, limit: int) -> Tuple[int, Any, bytes]:
        """Sends one request and reads at most limit + 1 bytes of its
        answer: (status, headers, body)."""
        request = self.request_bytes(method, target, headers, body)
        for attempt in (1, 2):
            reused = self._reusable()
            sent = False
            try:
                if reused:
                    assert self.sock is not None
                    self.sock.settimeout(timeout)
                else:
                    self.close()
                    self.sock = socket.create_connection((self.host, self.port), timeout)
                    self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.sock.sendall(request)
                sent = True
                resp = http.client.HTTPResponse(self.sock, method=method)
                resp.begin()
                raw: bytes = resp.read(limit + 1)
            except (OSError, http.client.HTTPException):
                self.close()
                if reused and attempt == 1 and (not sent or method in ("GET", "HEAD")):
                    continue
                raise
            if not resp.isclosed() or resp.will_close:  # an answer not read to its end, or the server closes
                self.close()
            self.used = time.monotonic()
            return resp.status, resp.headers, raw
        raise AssertionError("unreachable")


# What may stand in a request line and a header (RFC 9110's token; a
# target with no space or control character), and what may not stand in
# a header's value.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TARGET = re.compile(r"[\x21-\x7e]+")
_BAD_VALUE = re.compile(r"[\x00\r\n]")

_REDIRECTS = (301, 302, 303, 307, 308)


class Client:
    """One actor's client of one annald."""

    def __init__(self, base_url: str, credential: str = "", *, attempts: int = 1, first_wait: float = 0.25,
                 max_wait: float = 5.0, timeout: float = 60.0, signing_key: Union[SigningKey, str, None] = None,
                 on_retry: Optional[Callable[[APIError, int, float], None]] = None) -> None:
        """attempts is how many sends in all (1: no retry; CLI_RETRY is the
        annal CLI's policy); the wait doubles from first_wait, or is the
        answer's Retry-After if longer, at most max_wait; on_retry is told
        of each retry (error, attempt, wait) before its wait.

        signing_key, if given (a SigningKey, or its PRIVATE+KEY+... text as
        `annal keys generate` writes it), signs every request that may
        change something (not GET, not blobs) as annal/signed-request/v1,
        for the log's origin and the client's actor, read once from annald."""
        self.base_url = base_url.rstrip("/") + "/"
        if urllib.parse.urlsplit(self.base_url).scheme not in ("http", "https"):
            raise ValueError(f"server URL {base_url!r} is not an http(s) URL")
        self.credential = credential
        self.signing_key = SigningKey.parse(signing_key) if isinstance(signing_key, str) else signing_key
        self._identity: Optional[Tuple[str, str]] = None
        self.attempts = attempts
        self.first_wait = first_wait
        self.max_wait = max_wait
        self.timeout = timeout
        self.on_retry = on_retry
        self._kept = threading.local()  # each thread's _KeptConnection
        self._proxied: Dict[str, bool] = {}  # by host:port, whether the environment's proxy takes it

    def close(self) -> None:
        """Closes the calling thread's kept connection to annald (the
        client opens another when asked again); connections are also
        closed when their thread or the client goes."""
        kept: Optional[_KeptConnection] = getattr(self._kept, "conn", None)
        if kept is not None:
            kept.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def signing_identity(self) -> Tuple[str, str]:
        """The log's origin and the client's actor, which every signature
        names (read once)."""
        if self._identity is None:
            self._identity = (self.info()["origin"], self._json("GET", "v1/whoami")["id"])
        return self._identity

    def _signature(self, method: str, path: str, body: Optional[Any]) -> str:
        assert self.signing_key is not None
        origin, by = self.signing_identity()
        nonce, at = new_nonce(), now_rfc3339()
        stmt = signed_statement(origin, by, nonce, at, method, path, body)
        return signature_header(self.signing_key, nonce, at, self.signing_key.sign(stmt))

    def _signs(self, method: str, path: str) -> bool:
        """Blobs lead to no event: their uploads are not signed."""
        return self.signing_key is not None and method not in ("GET", "HEAD") and not path.startswith("v1/blobs")

    def _headers(self, method: str, url: str, path: str, body: Optional[bytes], signed: Optional[SignedForm],
                 headers: Optional[Mapping[str, str]]) -> Dict[str, str]:
        out: Dict[str, str] = {}
        if body is not None:
            out["Content-Type"] = "application/json"
        if self.credential:
            out["Authorization"] = "Bearer " + self.credential
        out.update(headers or {})
        if self._signs(method, path):
            form = signed or (method, urllib.parse.urlsplit(url).path, None)
            out["Annal-Signature"] = self._signature(*form)
        return out

    def _open(self, method: str, path: str, body: Optional[bytes], signed: Optional[SignedForm],
              headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None) -> Any:
        """Sends one request through urllib, on a connection of its own,
        and returns the open answer; an answer of status 300 or more
        raises its APIError. timeout (else the client's) bounds the
        connection and each read."""
        url = self.base_url + path.lstrip("/")
        req = urllib.request.Request(url, data=body, method=method)
        for k, v in self._headers(method, url, path, body, signed, headers).items():
            req.add_header(k, v)
        try:
            return urllib.request.urlopen(req, timeout=self.timeout if timeout is None else timeout)
        except urllib.error.HTTPError as e:
            raise _error(e.code, e.read(MAX_RESPONSE_BODY), e.headers.get("Retry-After")) from None

    def _kept_connection(self, split: urllib.parse.SplitResult) -> Optional[_KeptConnection]:
        """This thread's kept connection to annald, for a plain-HTTP URL
        (split) that no proxy from the environment takes; None otherwise
        (https and proxies go through urllib)."""
        if split.scheme != "http" or not split.hostname:
            return None
        proxied = self._proxied.get(split.netloc)
        if proxied is None:  # read once, as urllib's opener reads the environment once
            proxies = urllib.request.getproxies()
            proxied = self._proxied[split.netloc] = "http" in proxies and not urllib.request.proxy_bypass(split.netloc)
        if proxied:
            return None
        port = split.port or 80
        kept: Optional[_KeptConnection] = getattr(self._kept, "conn", None)
        if kept is None or (kept.host, kept.port) != (split.hostname, port):
            if kept is not None:
                kept.close()
            kept = _KeptConnection(split.hostname, port)
            self._kept.conn = kept
        return kept

    def _once(self, method: str, path: str, body: Optional[bytes], signed: Optional[SignedForm],
              answer: Optional[Dict[str, str]] = None) -> bytes:
        limit = MAX_BLOB_BODY if method == "GET" and path.startswith(("v1/blobs/", "v1/vfs/")) else MAX_RESPONSE_BODY
        url = self.base_url + path.lstrip("/")
        split = urllib.parse.urlsplit(url)
        kept = self._kept_connection(split)
        status = 0
        if kept is not None:
            target = split.path + ("?" + split.query if split.query else "")
            status, resp_headers, raw = kept.exchange(method, target, body,
                                                      self._headers(method, url, path, body, signed, None),
                                                      self.timeout, limit)
            if status >= 300 and not (status in _REDIRECTS and method in ("GET", "HEAD")):
                raise _error(status, raw[:MAX_RESPONSE_BODY], resp_headers.get("Retry-After"))
            if answer is not None:
                answer["link"] = resp_headers.get("Link") or ""
        if kept is None or status >= 300:  # urllib: https, a proxy, or a redirect to follow
            with self._open(method, path, body, signed) as resp:
                raw = resp.read(limit + 1)
                if answer is not None:
                    answer["link"] = resp.headers.get("Link") or ""
        if len(raw) > limit:
            raise APIError(0, f"{method} {path}: answer is larger than {limit} bytes")
        return raw

    def request_raw(self, method: str, path: str, data: Optional[bytes] = None,
                    signed: Optional[SignedForm] = None, answer: Optional[Dict[str, str]] = None) -> bytes:
        """Sends data as the body, retrying as the class says; a signing
        client signs signed (method, path, body) in place of the request
        itself when given, with a new nonce at each send. answer, when
        given, receives the answer's Link header."""
        wait = self.first_wait
        attempt = 1
        while True:
            try:
                return self._once(method, path, data, signed, answer)
            except APIError as e:
                if not _retryable(e) or attempt >= self.attempts:
                    raise
                d = max(wait, e.retry_after or 0.0)
                if self.max_wait > 0:
                    d = min(d, self.max_wait)
                if self.on_retry is not None:
                    self.on_retry(e, attempt, d)
                time.sleep(d)
                wait *= 2
                attempt += 1

    def request(self, method: str, path: str, body: Optional[Any] = None) -> bytes:
        """Sends one request (body as JSON), retrying as the class says."""
        if body is None:
            return self.request_raw(method, path)
        url_path = urllib.parse.urlsplit(self.base_url + path.lstrip("/")).path
        data = json.dumps(body, allow_nan=False).encode("utf-8")  # NaN and infinities are not JSON
        return self.request_raw(method, path, data, (method, url_path, body))

    def _json(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        return _decode(self.request(method, path, body), f"{method} {path}")

    def _list(self, path: str) -> List[JSON]:
        """Every item of a list endpoint: annald answers lists in pages,
        each naming the next in a Link header (rel="next"), followed here."""
        items: List[JSON] = []
        next_path = f"{path}?limit={LIST_PAGE_SIZE}"
        pages = 0
        while next_path:
            if pages == MAX_LIST_PAGES:
                raise APIError(0, f"GET {path}: more than {MAX_LIST_PAGES} pages")
            pages += 1
            answer: Dict[str, str] = {}
            page = _decode(self.request_raw("GET", next_path, answer=answer), f"GET {next_path}")
            if not isinstance(page, list):
                raise APIError(0, f"GET {next_path}: answer is not a JSON list")
            items.extend(page)
            m = _NEXT_LINK.search(answer.get("link", ""))
            next_path = ""
            if m:
                if not m.group(1).startswith(f"/{path}?") or not page:
                    raise APIError(0, f"GET {path}: the next page {m.group(1)} is not a page of the same list")
                next_path = m.group(1)[1:]
        return items

    def info(self) -> JSON:
        """The log's origin, verifier key and size (GET /v1/info)."""
        out: JSON = self._json("GET", "v1/info")
        return out

    def submit(self, type: str, target: str, payload: Optional[Any] = None, *, envelope: str = "",
               session: str = "", seal: bool = False, subject: str = "", wait_published: bool = False,
               **fields: Any) -> JSON:
        """Submits an action and returns its receipt: status "committed",
        or "held" with hold_id when a human must answer. With
        wait_published the receipt also holds the checkpoint and proof.

        seal (or subject) keeps the payload out of the log: the event holds
        a salted commitment, the kernel the payload, sealed under subject's
        key (the actor's when none is named). A signing client draws the
        salt and names the subject itself, so that it signs the commitment
        the event will carry (FORMATS.md, "Sealed payloads"); the salt is
        then in the receipt as "salt"."""
        req: JSON = {"type": type, "target": target, **fields}
        if payload is not None:
            req["payload"] = payload
        for k, v in (("envelope", envelope), ("session", session), ("subject", subject)):
            if v:
                req[k] = v
        if seal:
            req["seal"] = True
        self._prepare_seal(req)
        path = "v1/actions?wait=published" if wait_published else "v1/actions"
        out: JSON = self._json("POST", path, req)
        if "salt" in req:
            out.setdefault("salt", req["salt"])
        return out

    def _prepare_seal(self, req: JSON) -> None:
        """Draws the salt and names the subject of a sealing request the client signs."""
        if self.signing_key is None or not (req.get("seal") or req.get("subject") or req.get("salt")):
            return
        if not req.get("subject"):
            req["subject"] = self.signing_identity()[1]
        if not req.get("salt"):
            req["salt"] = base64.b64encode(os.urandom(32)).decode("ascii")

    def observe(self, target: str, *, envelope: str = "", session: str = "") -> JSON:
        """Logs a read-only call (an observe) and returns its receipt; a
        refusal raises DeniedError, and the call must not run."""
        return self.submit("observe", target, envelope=envelope, session=session)

    def decide_intent(self, target: str, input: str, *, envelope: str = "", session: str = "",
                      about: Optional[Mapping[str, Any]] = None, on_held: Optional[Callable[[str], object]] = None,
                      timeout: float = 300.0, poll: float = 0.5) -> Intent:
        """Submits an execute intent (rules version 3) for what is about to
        run on target — input its content id (annal.execute), about what the
        log says of it — and returns once the kernel allowed it. A held
        intent calls on_held with the hold id and waits up to timeout for a
        human's answer: a rejection (or a hold that timed out or failed)
        raises HoldRefusedError, no answer in time HoldPendingError, a
        denial the kernel's DeniedError. Nothing may run unless it returns."""
        rc = self.submit("execute", target, intent_payload(input, about), envelope=envelope, session=session)
        intent = Intent(index=int(rc["index"]), target=target, input_oid=input, envelope=rc.get("envelope") or envelope,
                        session=session)
        if rc.get("status") != "held":
            return intent
        intent.hold_id = rc["hold_id"]
        if on_held is not None:
            on_held(intent.hold_id)
        h = self.wait_hold(intent.hold_id, timeout=timeout, poll=poll)
        if h.get("status") == "pending":
            raise HoldPendingError(intent.hold_id, timeout)
        if h.get("status") != "approved":
            raise HoldRefusedError(h)
        intent.index = int(h["answered_at"])
        return intent

    def record_result(self, intent: Intent, result: Result) -> JSON:
        """Commits what ran under intent (result's intent and input_oid are
        filled from it). A result that could not be committed leaves the
        intent open in the log: the caller must report the run as failed."""
        result.intent, result.input_oid = intent.index, intent.input_oid
        return self.submit("execute", intent.target, result.payload(), envelope=intent.envelope, session=intent.session)

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

    # Actors, budget, envelopes and holds.

    def who_am_i(self) -> JSON:
        """The actor whose credential the client presents, with its energy."""
        out: JSON = self._json("GET", "v1/whoami")
        return out

    def actor(self, actor_id: str) -> JSON:
        """An actor's record and energy (its own, its creator's or root's view)."""
        out: JSON = self._json("GET", "v1/actors/" + _seg(actor_id))
        return out

    def actors(self) -> List[JSON]:
        """The actors the caller may see: itself, those it created, and for root everyone."""
        return self._list("v1/actors")

    def set_status(self, actor_id: str, status: str, reason: str = "") -> JSON:
        """Freezes ("frozen"), unfreezes ("active") or terminates ("terminated") an agent."""
        body: JSON = {"status": status, **({"reason": reason} if reason else {})}
        out: JSON = self._json("POST", f"v1/actors/{_seg(actor_id)}/status", body)
        return out

    def set_signing_key(self, actor_id: str, key: str = "", *, require_signed: bool = False, reason: str = "") -> JSON:
        """Registers, rotates (key: a verifier key, str(SigningKey.verifier))
        or revokes (key empty) an actor's signing key: the actor itself
        (signed by its current key if it has one), its creator or root."""
        body: JSON = {}
        for k, v in (("key", key), ("require_signed", require_signed), ("reason", reason)):
            if v:
                body[k] = v
        out: JSON = self._json("POST", f"v1/actors/{_seg(actor_id)}/key", body)
        return out

    def envelopes(self) -> List[JSON]:
        """The envelopes the client's actor holds or issued."""
        return self._list("v1/envelopes")

    def revoke_envelope(self, envelope_id: str, reason: str = "") -> JSON:
        """Revokes an envelope and, with it, its sub-envelopes; returns the receipt."""
        out: JSON = self._json("POST", f"v1/envelopes/{_seg(envelope_id)}/revoke",
                               {"reason": reason} if reason else {})
        return out

    def holds(self, status: str = "") -> List[JSON]:
        """The holds the client's actor may see; status filters ("pending")."""
        path = "v1/holds" + ("?status=" + urllib.parse.quote(status, safe="") if status else "")
        out: List[JSON] = self._json("GET", path)
        return out

    def budget(self) -> JSON:
        """What the kernel's MCP budget tool answers (agentmcp.Budget): the
        actor, its energy balance and reserve, and each envelope it holds
        with what is left of it (budget - consumed - reserved), its grants
        and holds; and its ring when the caller may read the rings."""
        me = self.who_am_i()
        envs = []
        for v in self.envelopes():
            if v.get("holder") != me["id"]:
                continue
            e: JSON = {"id": v["id"], "budget": v["budget"],
                       "remaining": v["budget"] - v.get("consumed", 0) - v.get("reserved", 0),
                       "grants": v.get("grants") or []}
            for k in ("hold_on", "expires", "revoked", "parent"):
                if v.get(k):
                    e[k] = v[k]
            envs.append(e)
        out: JSON = {"actor": me["id"], "balance": me.get("balance", 0), "reserved": me.get("reserved", 0),
                     "envelopes": envs}
        try:
            rings = self._list("v1/rings")
        except APIError:
            rings = None
        if isinstance(rings, list):
            for r in rings:
                if isinstance(r, dict) and r.get("agent") == me["id"]:
                    out["ring"] = r
        return out

    def may_ever(self, actions: List[JSON], observe_needs_grant: bool = False) -> List[JSON]:
        """Which of actions ({type, target}) the client's actor could ever be allowed, in order."""
        out: List[JSON] = self._json("POST", "v1/actions/may-ever",
                                     {"actions": actions, "observe_needs_grant": observe_needs_grant})
        return out

    def erase_subject(self, subject: str, reason: str = "") -> JSON:
        """Erases a data subject's sealed payloads (a human): the log
        records it, and the kernel destroys the subject's key."""
        out: JSON = self._json("POST", f"v1/subjects/{_seg(subject)}/erase", {"reason": reason} if reason else {})
        return out

    # The history and its live stream.

    def history(self, **query: Union[str, int]) -> JSON:
        """One page of GET /v1/events: {events: [{index, leaf_hash, event,
        sealed_payload?, erased?}], next_cursor?}; query holds its filters
        (actor, envelope, session, kind, type, outcome, target, since,
        until, trace_id), order ("newest" or "oldest"), cursor and limit.
        Each event is the entry exactly as logged, parsed."""
        out: JSON = self._json("GET", "v1/events?" + _query(query, HISTORY_PARAMS))
        return out

    def history_all(self, **query: Union[str, int]) -> Iterator[JSON]:
        """Every history item the query selects, page after page (following next_cursor)."""
        while True:
            page = self.history(**query)
            yield from page.get("events") or []
            if page.get("next_cursor") is None:
                return
            query["cursor"] = int(page["next_cursor"])

    def stream(self, *, after: Optional[int] = None, idle_timeout: float = 60.0, reconnect_wait: float = 1.0,
               **filters: Union[str, int]) -> Generator[JSON, None, None]:
        """Follows GET /v1/events/stream with the history's filters (and
        cursor), yielding each history item in log order, for as long as
        the caller iterates. after, if set, starts after that index; else
        the stream starts with the next event logged once the generator
        first runs. A dropped connection (or one silent for idle_timeout:
        annald sends a keep-alive every 15 s) is opened again after
        reconnect_wait from the last item the caller took, so none is
        missed or repeated; an error answer, or an "event: error" the
        stream ends with, raises its APIError."""
        query = _query(filters, HISTORY_FILTERS + ("cursor",))
        while True:
            headers = {"Accept": "text/event-stream"}
            if after is not None:
                headers["Last-Event-ID"] = str(int(after))
            try:
                resp = self._open("GET", "v1/events/stream?" + query, None, None, headers, idle_timeout)
            except APIError:
                raise
            except (OSError, http.client.HTTPException):
                time.sleep(reconnect_wait)
                continue
            try:
                for item in _read_events(resp):
                    yield item
                    after = int(item["index"])
            except (OSError, http.client.HTTPException):
                pass  # dropped: open it again from after
            finally:
                resp.close()
            time.sleep(reconnect_wait)

    # Blobs.

    def put_blob(self, data: bytes) -> str:
        """Stores data in annald's blob store (annald --keep-blobs) and
        returns its OID, checked to be the hash of what was sent."""
        b = _object(self.request_raw("POST", "v1/blobs", bytes(data)), "POST v1/blobs")
        want = oid_of(data)
        if b.get("oid") != want or b.get("size") != len(data):
            raise VerificationError(f"the blob store answered {b.get('oid')} ({b.get('size')} bytes) "
                                    f"for {want} ({len(data)} bytes)")
        return want

    def blob(self, oid: str) -> bytes:
        """The bytes of a blob (a human's credential), checked to hash to oid."""
        data = self.request_raw("GET", "v1/blobs/" + _seg(oid))
        if oid_of(data) != oid:
            raise VerificationError(f"blob {oid}: the bytes served hash to {oid_of(data)}")
        return data

    # The agent file system (vfs://{agent}/{path}).

    def vfs_put(self, uri: str, data: bytes, envelope: str = "") -> JSON:
        """Writes data to the file uri names, under envelope (empty: the
        oldest of the agent's envelopes that allows it): {uri, oid, size,
        receipt}, the receipt "held" when a human must answer first. The
        kernel logs the write as an action naming the content's OID, which
        the answer must match; a signing client signs that action."""
        p = parse_uri(uri)
        p.check_writable()
        if len(data) > MAX_CONTENT:
            raise ValueError(f"{uri}: {len(data)} bytes, more than a file of the agent file system holds "
                             f"({MAX_CONTENT})")
        path = p.api_path + ("?envelope=" + urllib.parse.quote(envelope, safe="") if envelope else "")
        want = oid_of(data)
        signed_as = ("POST", "/v1/actions", p.write_request(want, envelope))  # the action the write is
        out = _object(self.request_raw("PUT", path, bytes(data), signed_as), "PUT " + path)
        if out.get("oid") != want or out.get("size") != len(data):
            raise VerificationError(f"{uri}: the kernel answered {out.get('oid')} ({out.get('size')} bytes) "
                                    f"for {want} ({len(data)} bytes)")
        return out

    def vfs_list(self, uri: str) -> JSON:
        """The files at or under the directory uri names ({uri, files:
        [{path, oid, index, writer, time}], resumed?})."""
        p = parse_uri(uri)
        if not p.is_dir:
            raise ValueError(f"{uri} is not a directory of the tree")
        out: JSON = self._json("GET", p.api_path)
        return out

    def vfs_read(self, uri: str) -> Tuple[bytes, Optional[JSON]]:
        """The content of the file uri names and its listing record (path,
        oid, index, writer, time), after checking that the bytes hash to
        the OID the log recorded for it; or a view of the log
        (policy/active.json, policy/history.json, audit/events.jsonl) and None."""
        p = parse_uri(uri)
        if p.is_dir:
            raise ValueError(f"{uri} is a directory: list it")
        if p.is_view:
            return self.request_raw("GET", p.api_path), None
        listing = self.vfs_list(f"vfs://{p.agent}/{p.dir}")
        f = next((lf for lf in listing.get("files") or [] if lf.get("path") == p.rel), None)
        if f is None:
            raise NotFoundError(404, f"{uri}: no such file")
        data = self.request_raw("GET", p.api_path)
        if oid_of(data) != f["oid"]:
            raise VerificationError(f"{uri}: the bytes served hash to {oid_of(data)}, not {f['oid']} "
                                    f"(written at index {f.get('index')}; or written again meanwhile)")
        return data, f


def _decode(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise APIError(0, f"{what}: answer is not JSON") from None


def _object(raw: bytes, what: str) -> JSON:
    out = _decode(raw, what)
    if not isinstance(out, dict):
        raise APIError(0, f"{what}: answer is not a JSON object")
    return out


def _seg(s: str) -> str:
    """One path segment, escaped as Go's url.PathEscape does."""
    return urllib.parse.quote(s, safe="!$&'()*+,;=:@")


def _query(params: Mapping[str, Union[str, int]], allowed: Tuple[str, ...]) -> str:
    for k in params:
        if k not in allowed:
            raise TypeError(f"unknown parameter {k!r} (one of {', '.join(allowed)})")
    return urllib.parse.urlencode({k: str(v) for k, v in params.items()})


def _read_events(resp: Any) -> Iterator[JSON]:
    """The history items of a Server-Sent Events answer. An "event: error"
    raises the kernel's message; the end of the answer raises
    ConnectionError (a stream ends only when dropped)."""
    data, kind = "", ""
    while True:
        raw: bytes = resp.readline(MAX_RESPONSE_BODY + 1)
        if not raw:
            raise ConnectionError("the stream ended")
        if len(raw) > MAX_RESPONSE_BODY:
            raise APIError(502, f"a stream line is longer than {MAX_RESPONSE_BODY} bytes")
        if not raw.endswith(b"\n"):
            raise ConnectionError("the stream was cut short")
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise APIError(502, "a stream line is not UTF-8") from None
        if line.startswith("data: "):
            data = line[len("data: "):]
        elif line.startswith("event: "):
            kind = line[len("event: "):]
        elif line == "" and data:
            if kind == "error":
                try:
                    msg = json.loads(data)
                except (ValueError, RecursionError):
                    msg = data
                raise APIError(500, str(msg))
            try:
                item = json.loads(data)
            except (ValueError, RecursionError):
                raise APIError(502, "a stream event is not a history item") from None
            index = item.get("index") if isinstance(item, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise APIError(502, "a stream event is not a history item")
            yield item
            data, kind = "", ""
