"""Fuzzing of the client's parsers of outside input, from a seed corpus
(testvectors/ and the answers annald gives), with a fixed random seed so
that a failure repeats: vfs:// URIs, annald's error answers (body and
Retry-After) and the live stream's Server-Sent Events. Each either reads
its input or refuses it with its documented error, never another
exception, and what it reads holds what it promises."""

import io
import json
import random
import unittest
from typing import Any, Callable, List

from annal.client import _error, _read_events
from annal.errors import APIError
from annal.vfspath import InvalidPathError, parse_uri

from ._vectors import load

ROUNDS = 5000


def mutate(rng: random.Random, seed: bytes) -> bytes:
    """seed with a few random byte edits: flip, insert, delete, duplicate a run."""
    b = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b and i < len(b):
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i:i] = bytes([rng.choice(b"/.:-_aZ09 \x00\xff\n{}\"\\%" + bytes([rng.randrange(256)]))])
        elif op == 2 and b:
            del b[i:i + rng.randint(1, 8)]
        elif op == 3:
            j = rng.randrange(len(b) + 1)
            b[i:i] = b[min(i, j):max(i, j)][:64]
        else:
            b[i:i] = rng.choice([b"../", b"//", b"\xc3\xa9", b"\r\n", b"data: ", b"event: error\n", b"\n\n"])
    return bytes(b)


def fuzz(corpus: List[bytes], check: Callable[[bytes], None], rounds: int = ROUNDS) -> None:
    rng = random.Random(39)
    for seed in corpus:
        check(seed)
    for _ in range(rounds):
        data = mutate(rng, rng.choice(corpus))
        try:
            check(data)
        except AssertionError as e:
            raise AssertionError(f"input {data!r}: {e}") from None


class Fuzz(unittest.TestCase):
    def test_fuzz_vfs_uri(self) -> None:
        v = load("vfs.json")
        corpus = [w["uri"].encode() for w in v["writes"]] + [r["uri"].encode() for r in v["refused"]]
        corpus += [b"vfs://a1/", b"vfs://a1/ipc/outbox/b2/x", b"vfs://a1/policy/history.json"]

        def check(data: bytes) -> None:
            uri = data.decode("utf-8", "replace")
            try:
                p = parse_uri(uri)
            except InvalidPathError as e:
                assert str(e).startswith("not a path of the agent file system: "), e
                return
            # What it reads names itself: its URI and target read back the same.
            assert parse_uri(p.uri) == p, (p, p.uri)
            assert p.target == "vfs/" + p.agent + "/" + p.rel
            assert ".." not in p.rel.split("/") and "//" not in p.rel and not p.rel.startswith("/")
            assert all(c.isascii() for c in p.rel), p.rel

        fuzz(corpus, check)

    def test_fuzz_error_answer(self) -> None:
        corpus = [b'{"error":"denied","stage":"authorize","gate":"grant","reason":"no_grant","denial_index":12}',
                  b'{"error":"busy","retryable":true}', b'{"error":"x","outcome_unknown":true,"stopped":true}',
                  b"plain text", b"{}", b"[1,2]", b"[" * 5000]

        def check(data: bytes) -> None:
            for retry_after in (None, "1", data[:4].decode("latin-1")):
                e = _error(503, data, retry_after)
                assert isinstance(e, APIError)
                assert e.denial_index is None or (isinstance(e.denial_index, int) and e.denial_index >= 0)
                assert e.retry_after is None or e.retry_after >= 0
                assert isinstance(e.outcome_unknown, bool) and isinstance(e.retryable, bool)

        fuzz(corpus, check)

    def test_fuzz_stream_events(self) -> None:
        item = {"index": 7, "leaf_hash": "00" * 32, "event": {"kind": "action", "v": 1}}
        good = f"id: 7\nevent: event\ndata: {json.dumps(item)}\n\n".encode()
        corpus = [good, good + good.replace(b"7", b"8"), b": keep-alive\n\n" + good,
                  b'event: error\ndata: "forbidden"\n\n', b"data: {}\n\n", good[:-1]]

        def check(data: bytes) -> None:
            got: List[Any] = []
            try:
                for it in _read_events(io.BytesIO(data)):
                    got.append(it)
            except (APIError, ConnectionError):
                pass
            for it in got:
                assert isinstance(it, dict) and isinstance(it["index"], int) and it["index"] >= 0, it

        fuzz(corpus, check)


if __name__ == "__main__":
    unittest.main()
