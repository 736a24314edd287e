"""The client's own rules, against a scripted HTTP server on 127.0.0.1
(annald cannot be made to answer 503, a retryable 409 or outcome_unknown
on demand): the annal CLI's retry rules — 429 and 503 sent again after
Retry-After, a retryable 409 sent again, never an answer whose outcome is
unknown nor a stopped kernel's — a new signature nonce at each send, and
the local checks of blobs and files against their content ids.
test_client.RetriesAgainstAnnald shows the 429 of a real annald."""

import http.server
import json
import threading
import time
import unittest
from typing import Any, Dict, List, Optional, Tuple

from annal.client import CLI_RETRY, Client
from annal.errors import APIError, ConflictError, VerificationError
from annal.execute import oid_of
from annal.signing import SigningKey

Answer = Tuple[int, Dict[str, str], bytes]


class Scripted(http.server.ThreadingHTTPServer):
    """Answers each request with the next scripted answer for its path
    (the last one again when the script ends), and records what it got
    (header names in lower case)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script: Dict[str, List[Answer]] = {}
        self.got: List[Tuple[str, str, Dict[str, str], bytes]] = []

    def answer(self, path: str, *answers: Answer) -> None:
        self.script[path] = list(answers)

    def next_answer(self, path: str) -> Answer:
        answers = self.script.get(path.split("?")[0]) or [(404, {}, b'{"error":"no such route"}')]
        return answers.pop(0) if len(answers) > 1 else answers[0]


class Handler(http.server.BaseHTTPRequestHandler):
    server: Scripted

    def handle_one(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.got.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        status, headers, out = self.server.next_answer(self.path)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = handle_one

    def log_message(self, *args: Any) -> None:
        pass


def err(status: int, retry_after: Optional[str] = None, **fields: Any) -> Answer:
    headers = {"Retry-After": retry_after} if retry_after else {}
    return status, headers, json.dumps({"error": "scripted", **fields}).encode()


RECEIPT: Answer = (200, {}, b'{"status":"committed","index":7}')


class ClientRules(unittest.TestCase):
    def setUp(self) -> None:
        self.srv = Scripted()
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.addCleanup(self.srv.server_close)
        self.addCleanup(self.srv.shutdown)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        self.waits: List[Tuple[int, int, float]] = []

    def client(self, **kw: Any) -> Client:
        opts: Dict[str, Any] = {**CLI_RETRY, "first_wait": 0.01, "max_wait": 2.0, **kw}
        return Client(self.url, "cred", on_retry=lambda e, n, w: self.waits.append((e.status, n, w)), **opts)

    def sends(self) -> int:
        return sum(1 for m, p, _, _ in self.srv.got if p.startswith("/v1/actions"))

    def test_503_and_429_sent_again_after_retry_after(self) -> None:
        self.srv.answer("/v1/actions", err(503, "1"), err(429), RECEIPT)
        t = time.monotonic()
        self.assertEqual(self.client().submit("mutate", "w/x")["index"], 7)
        self.assertGreaterEqual(time.monotonic() - t, 1.0)  # Retry-After: 1 is longer than the doubling wait
        self.assertEqual(self.sends(), 3)
        self.assertEqual([(s, n) for s, n, _ in self.waits], [(503, 1), (429, 2)])
        self.assertEqual(self.waits[0][2], 1.0)
        # max_wait bounds a long Retry-After.
        self.srv.answer("/v1/actions", err(503, "30"), RECEIPT)
        self.client(max_wait=0.05).submit("mutate", "w/x")
        self.assertEqual(self.waits[-1][2], 0.05)

    def test_retryable_409_sent_again_but_not_a_plain_409(self) -> None:
        self.srv.answer("/v1/actions", err(409, retryable=True), RECEIPT)
        self.assertEqual(self.client().submit("mutate", "w/x")["status"], "committed")
        self.assertEqual(self.sends(), 2)
        self.srv.answer("/v1/actions", err(409), RECEIPT)
        with self.assertRaises(ConflictError):
            self.client().submit("mutate", "w/x")
        self.assertEqual(self.sends(), 3)

    def test_outcome_unknown_and_stopped_never_sent_again(self) -> None:
        for fields in ({"outcome_unknown": True, "retryable": True}, {"stopped": True}):
            with self.subTest(fields):
                before = self.sends()
                self.srv.answer("/v1/actions", err(503, "1", **fields), RECEIPT)
                with self.assertRaises(APIError) as cm:
                    self.client().submit("mutate", "w/x")
                self.assertEqual(self.sends() - before, 1)
                self.assertTrue(cm.exception.outcome_unknown or cm.exception.stopped)

    def test_gives_up_after_attempts_with_the_last_error(self) -> None:
        self.srv.answer("/v1/actions", err(503))
        with self.assertRaises(APIError) as cm:
            self.client(attempts=3).submit("mutate", "w/x")
        self.assertEqual((cm.exception.status, self.sends()), (503, 3))
        with self.assertRaises(APIError):
            Client(self.url, "cred").submit("mutate", "w/x")  # the default: one send
        self.assertEqual(self.sends(), 4)

    def test_each_send_of_a_signed_request_has_its_own_nonce(self) -> None:
        self.srv.answer("/v1/info", (200, {}, b'{"origin":"log.example/x"}'))
        self.srv.answer("/v1/whoami", (200, {}, b'{"id":"agent-1"}'))
        self.srv.answer("/v1/actions", err(503), RECEIPT)
        self.client(signing_key=SigningKey.generate("k")).submit("mutate", "w/x", {"a": 1})
        sigs = [h["annal-signature"] for m, p, h, _ in self.srv.got if p == "/v1/actions"]
        self.assertEqual(len(sigs), 2)
        nonces = {s.split("nonce=")[1].split(",")[0] for s in sigs}
        self.assertEqual(len(nonces), 2)

    def test_blobs_and_files_checked_against_their_content_ids(self) -> None:
        data = b"some bytes"
        self.srv.answer("/v1/blobs", (201, {}, json.dumps({"oid": oid_of(b"other"), "size": len(data)}).encode()))
        with self.assertRaises(VerificationError):
            self.client().put_blob(data)
        self.srv.answer("/v1/blobs", (201, {}, json.dumps({"oid": oid_of(data), "size": len(data)}).encode()))
        self.assertEqual(self.client().put_blob(data), oid_of(data))
        self.srv.answer("/v1/blobs/" + oid_of(data), (200, {}, b"tampered"))
        with self.assertRaises(VerificationError):
            self.client().blob(oid_of(data))
        self.srv.answer("/v1/vfs/agent-a/mem/working/x",
                        (201, {}, json.dumps({"oid": oid_of(b"other"), "size": 4, "receipt": {}}).encode()))
        with self.assertRaises(VerificationError):
            self.client().vfs_put("vfs://agent-a/mem/working/x", b"mine")
        listing = {"uri": "vfs://agent-a/mem/working/", "files": [{"path": "mem/working/x", "oid": oid_of(b"mine"),
                                                                   "index": 3}]}
        self.srv.answer("/v1/vfs/agent-a/mem/working", (200, {}, json.dumps(listing).encode()))
        self.srv.answer("/v1/vfs/agent-a/mem/working/x", (200, {}, b"not mine"))
        with self.assertRaises(VerificationError):
            self.client().vfs_read("vfs://agent-a/mem/working/x")

    def test_stream_reopened_after_the_last_event_taken_and_ended_by_an_error_event(self) -> None:
        def sse(*indices: int) -> bytes:
            return b"".join(f"id: {i}\nevent: event\ndata: {json.dumps({'index': i, 'event': {}})}\n\n".encode()
                            for i in indices)
        self.srv.answer("/v1/events/stream", (200, {}, b": keep-alive\n\n" + sse(7, 8)),
                        (200, {}, sse(9)[:-1]),  # cut short inside an event: it is not taken
                        (200, {}, b'event: error\ndata: "the viewer may no longer read this"\n\n'))
        live = self.client().stream(actor="agent-1", reconnect_wait=0.01)
        self.assertEqual([next(live)["index"] for _ in range(2)], [7, 8])
        with self.assertRaises(APIError) as cm:
            next(live)
        self.assertEqual(cm.exception.message, "the viewer may no longer read this")
        opened = [(p, h.get("last-event-id"), h.get("accept")) for m, p, h, _ in self.srv.got]
        self.assertEqual(opened, [("/v1/events/stream?actor=agent-1", None, "text/event-stream"),
                                  ("/v1/events/stream?actor=agent-1", "8", "text/event-stream"),
                                  ("/v1/events/stream?actor=agent-1", "8", "text/event-stream")])


if __name__ == "__main__":
    unittest.main()
