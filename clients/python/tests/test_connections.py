"""The client's kept connections, against HTTP/1.1 servers on 127.0.0.1
that count their connections: one connection for a thread's sequential
requests, a new one when the server closed the old or an answer was not
read to its end, a POST never sent twice on a connection that died under
it (a GET is), each thread its own, and https or a proxy left to urllib."""

import http.server
import json
import os
import socket
import threading
import time
import unittest
from typing import Any, Callable, Dict, List, Tuple
from unittest import mock
from urllib.parse import urlsplit

from annal.client import MAX_RESPONSE_BODY, Client
from annal.errors import APIError, ConflictError


class Counted(http.server.ThreadingHTTPServer):
    """Answers every request with its method, path and body as JSON (a
    path under /big: more than the client reads; /conflict: a 409),
    over HTTP/1.1 connections it keeps, and counts the connections."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), KeepAliveHandler)
        self.connections = 0
        self.lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.connections += 1
        super().process_request(request, client_address)


class KeepAliveHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Counted

    def handle_one(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, out = 200, json.dumps({"method": self.command, "path": self.path, "body": body.decode()}).encode()
        if self.path.startswith("/big"):
            out = b"x" * (MAX_RESPONSE_BODY + 10)
        elif self.path.startswith("/conflict"):
            status, out = 409, b'{"error":"changed under it","retryable":false}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = handle_one

    def log_message(self, *args: Any) -> None:
        pass


def serve(server: http.server.HTTPServer) -> str:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


class KeptConnections(unittest.TestCase):
    def setUp(self) -> None:
        # No proxy from the environment of whoever runs the tests.
        patcher = mock.patch.dict(os.environ, {k: "" for k in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")})
        patcher.start()
        self.addCleanup(patcher.stop)

    def counted(self) -> Counted:
        srv = Counted()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        return srv

    def test_sequential_requests_share_one_connection(self) -> None:
        srv = self.counted()
        with Client(serve(srv), "cred") as c:
            for i in range(30):
                got = json.loads(c.request("POST", "v1/echo", {"i": i}))
                self.assertEqual((got["method"], got["path"], json.loads(got["body"])), ("POST", "/v1/echo", {"i": i}))
                self.assertEqual(json.loads(c.request("GET", f"v1/echo?n={i}"))["path"], f"/v1/echo?n={i}")
        self.assertEqual(srv.connections, 1)

    def test_a_connection_the_server_closed_is_not_reused(self) -> None:
        # The server answers each connection's first request and then
        # closes its side, still reading: a request sent on that
        # connection is taken by the socket and never answered.
        def answer_then_close(conn: socket.socket, i: int, method: str) -> bool:
            if i == 0:
                conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}')
                conn.shutdown(socket.SHUT_WR)
            return True

        url, seen = self.raw_server(answer_then_close)
        with Client(url, "cred") as c:
            c.request("POST", "v1/a", {})
            time.sleep(0.1)
            self.assertEqual(c.request("POST", "v1/b", {"x": 1}), b"{}")  # on a new connection
        self.assertEqual(seen["POST"], 2)
        self.assertEqual(seen["connections"], 2)

    def test_an_answer_not_read_to_its_end_closes_its_connection(self) -> None:
        srv = self.counted()
        with Client(serve(srv), "cred") as c:
            with self.assertRaisesRegex(APIError, "larger than"):
                c.request("GET", "big")
            self.assertEqual(json.loads(c.request("GET", "v1/after"))["path"], "/v1/after")
        self.assertEqual(srv.connections, 2)

    def test_an_error_answer_keeps_the_connection(self) -> None:
        srv = self.counted()
        with Client(serve(srv), "cred") as c:
            with self.assertRaises(ConflictError) as e:
                c.request("POST", "conflict", {})
            self.assertEqual(e.exception.message, "changed under it")
            c.request("POST", "v1/after", {})
        self.assertEqual(srv.connections, 1)

    def test_each_thread_has_its_own_connection(self) -> None:
        srv = self.counted()
        errors: List[str] = []
        with Client(serve(srv), "cred") as c:
            def work(w: int) -> None:
                for i in range(20):
                    got = json.loads(c.request("POST", f"v1/w{w}", {"i": i}))
                    if got["path"] != f"/v1/w{w}" or json.loads(got["body"]) != {"i": i}:
                        errors.append(f"worker {w}, request {i}: {got}")
                c.close()
            threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])
        self.assertEqual(srv.connections, 8)

    def raw_server(self, answer: Callable[[socket.socket, int, str], bool]) -> Tuple[str, Dict[str, int]]:
        """A server on a socket: answer(conn, i, method) writes what it
        likes for each connection's i-th request and says whether to read
        the next. It counts connections and requests by method."""
        ln = socket.create_server(("127.0.0.1", 0))
        self.addCleanup(ln.close)
        seen: Dict[str, int] = {"connections": 0}

        def serve_conn(conn: socket.socket) -> None:
            with conn, conn.makefile("rb") as r:
                for i in range(100):
                    line = r.readline()
                    if not line:
                        return
                    method = line.split()[0].decode()
                    length = 0
                    while (h := r.readline()) not in (b"\r\n", b""):
                        if h.lower().startswith(b"content-length:"):
                            length = int(h.split(b":")[1])
                    r.read(length)
                    seen[method] = seen.get(method, 0) + 1
                    if not answer(conn, i, method):
                        return

        def accept() -> None:
            while True:
                try:
                    conn, _ = ln.accept()
                except OSError:
                    return
                seen["connections"] += 1
                threading.Thread(target=serve_conn, args=(conn,), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        return f"http://127.0.0.1:{ln.getsockname()[1]}", seen

    def test_a_post_is_never_sent_twice_and_a_get_is(self) -> None:
        # Each connection's first request is answered; its second is read
        # and dropped with the connection, as by a server that timed the
        # connection out as the request arrived.
        def answer_once(conn: socket.socket, i: int, method: str) -> bool:
            if i == 0:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            return i == 0

        url, seen = self.raw_server(answer_once)
        with Client(url, "cred") as c:
            c.request("GET", "v1/a")
            self.assertEqual(c.request("GET", "v1/b"), b"{}")  # sent again on a new connection
            self.assertEqual(seen.get("GET"), 3)
            with self.assertRaises(OSError):  # http.client's RemoteDisconnected is a ConnectionResetError
                c.request("POST", "v1/act", {})
            self.assertEqual(seen.get("POST"), 1)

    def test_a_request_that_would_break_its_framing_is_refused_unsent(self) -> None:
        srv = self.counted()
        with Client(serve(srv), "cred\r\nX-Injected: 1") as c:
            with self.assertRaises(ValueError):
                c.request("POST", "v1/echo", {})
        with Client(serve(srv), "cred") as c:
            with self.assertRaises(ValueError):
                c.request("GET", "v1/echo path")
        self.assertEqual(srv.connections, 0)

    def test_https_and_proxies_go_through_urllib(self) -> None:
        c = Client("http://127.0.0.1:7420", "cred")
        self.assertIsNotNone(c._kept_connection(urlsplit("http://127.0.0.1:7420/v1/health")))
        self.assertIsNone(c._kept_connection(urlsplit("https://kernel.example/v1/health")))
        c.close()
        with mock.patch.dict(os.environ, {"http_proxy": "http://proxy.example:3128", "no_proxy": ""}):
            with Client("http://kernel.example:7420", "cred") as proxied:
                self.assertIsNone(proxied._kept_connection(urlsplit("http://kernel.example:7420/v1/health")))
        with mock.patch.dict(os.environ, {"http_proxy": "http://proxy.example:3128", "no_proxy": "kernel.example"}):
            with Client("http://kernel.example:7420", "cred") as bypassed:
                self.assertIsNotNone(bypassed._kept_connection(urlsplit("http://kernel.example:7420/v1/health")))


if __name__ == "__main__":
    unittest.main()
