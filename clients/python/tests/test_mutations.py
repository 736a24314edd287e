"""Seeded random mutations of the known-answer inputs (the seed corpus is
testvectors/): every reader of outside input either refuses a changed input
with VerificationError, never another exception, or, where FORMATS.md says
the bytes are not authenticated (a tlog-proof's extra line), reads the same
result."""

import os
import random
import unittest
from typing import Callable, List

from annal.errors import VerificationError
from annal.jcs import read_entry
from annal.note import Policy, open_checkpoint
from annal.proof import parse_hash_lines, verify_consistency, verify_proof

from ._vectors import keys, load

ROUNDS = int(os.environ.get("ANNAL_MUTATION_ROUNDS", "400"))  # more to search longer


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(4)
        i = rng.randrange(len(b) + 1) if b else 0
        c = rng.choice([0x00, 0x0A, 0x0D, 0x20, 0x2B, 0x2F, 0x30, 0x3D, 0x41, 0x61, 0x7F, 0xC3, 0xE2, 0xFF,
                        rng.randrange(256)])
        if op == 0 and i < len(b):
            b[i] = c if b[i] != c else c ^ 1
        elif op == 1:
            b.insert(i, c)
        elif op == 2 and i < len(b):
            del b[i]
        elif op == 3 and i < len(b):
            b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


class Mutations(unittest.TestCase):
    def each(self, seeds: List[bytes], check: Callable[[bytes], None], name: str) -> None:
        rng = random.Random(name)
        for n in range(ROUNDS):
            seed = rng.choice(seeds)
            bad = mutate(rng, seed)
            if bad == seed:
                continue
            try:
                check(bad)
            except VerificationError:
                pass
            except Exception as e:  # noqa: BLE001 - the test is that nothing else escapes
                self.fail(f"{name} round {n}: {type(e).__name__}: {e} on {bad!r}")

    def test_checkpoints_are_refused_when_changed(self) -> None:
        f = load("checkpoints.json")
        ks = keys(f)
        seeds = [v["signed_note"].encode() for v in f["vectors"]]
        by_note = {v["signed_note"].encode(): ks[v["signers"][0]] for v in f["vectors"]}

        def check(bad: bytes) -> None:
            for key in set(by_note.values()):
                try:
                    open_checkpoint(bad, key)
                except VerificationError:
                    continue
                # Accepted: only a change to a signature by another key (ignored) may be.
                cp, _ = open_checkpoint(bad, key)
                self.assertIn(cp.marshal() + b"\n", [s[: len(cp.marshal()) + 1] for s in seeds])
        self.each(seeds, check, "checkpoint")

    def test_tlog_proofs(self) -> None:
        f = load("tlogproofs.json")
        log = keys(f)["log"]
        entries = [e.encode() for e in f["entries"]]
        seeds = [v["proof"].encode() for v in f["inclusion"]]

        def check(bad: bytes) -> None:
            for i, e in enumerate(entries):
                try:
                    res = verify_proof(e, bad, log)
                except VerificationError:
                    continue
                ok = [v for v in f["inclusion"] if v["index"] == res.index == i]
                self.assertTrue(ok, f"a changed proof proves entry {i}: {bad!r}")
        self.each(seeds, check, "tlog-proof")

    def test_consistency_proofs(self) -> None:
        f = load("tlogproofs.json")
        log = keys(f)["log"]
        vs = [v for v in f["consistency"] if v["proof"]]

        def check(bad: bytes) -> None:
            for v in vs:
                try:
                    verify_consistency(v["checkpoint1"], v["checkpoint2"], bad, log)
                except VerificationError:
                    continue
                self.assertEqual(parse_hash_lines(bad), parse_hash_lines(v["proof"]))
        self.each([v["proof"].encode() for v in vs], check, "consistency")

    def test_cosigned_checkpoints(self) -> None:
        f = load("cosignatures.json")
        log = keys(f)[f["keys"][0]["label"]]
        ws = {w["label"]: w["verifier_key"] for w in f["witnesses"]}
        policies = [Policy.parse(f"log {log}\nwitness {v['witness']} {ws[v['witness']]}\nquorum {v['witness']}\n")
                    for v in f["vectors"]]

        def check(bad: bytes) -> None:
            for p in policies:
                try:
                    p.open_checkpoint(bad)
                except VerificationError:
                    continue
                self.fail(f"a changed cosigned checkpoint is accepted: {bad!r}")
        self.each([v["cosigned_checkpoint"].encode() for v in f["vectors"]], check, "cosignature")

    def test_entries(self) -> None:
        f = load("events.json")
        seeds = [v["entry"].encode() for v in f["vectors"]]
        originals = set(seeds)

        def check(bad: bytes) -> None:
            v = read_entry(bad)
            # Accepted: then it is canonical JSON of what it says, and new.
            self.assertNotIn(bad, originals)
            self.assertIsInstance(v, dict)
        self.each(seeds, check, "entry")


if __name__ == "__main__":
    unittest.main()
