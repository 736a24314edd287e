"""tlogproofs.json: RFC 6962 leaf hashes and root, c2sp.org/tlog-proof@v1
inclusion proofs, consistency proofs, and the proofs a verifier must refuse."""

import base64
import unittest

from annal.errors import VerificationError
from annal.merkle import leaf_hash, root_of, verify_consistency as merkle_consistency
from annal.proof import parse_hash_lines, parse_tlog_proof, verify_consistency, verify_proof

from ._vectors import keys, load


class TLogProofVectors(unittest.TestCase):
    f = load("tlogproofs.json")

    def setUp(self) -> None:
        self.log = keys(self.f)["log"]
        self.entries = [e.encode("utf-8") for e in self.f["entries"]]
        self.leaves = [leaf_hash(e) for e in self.entries]

    def test_leaf_hashes_and_root(self) -> None:
        self.assertEqual(len(self.entries), 7)
        self.assertEqual([h.hex() for h in self.leaves], self.f["leaf_hashes"])
        self.assertEqual(base64.b64encode(root_of(self.leaves)).decode(), self.f["root_hash"])
        result = verify_consistency(self.f["checkpoint"], self.f["checkpoint"], "", self.log)
        self.assertEqual(result[1].root_hash, root_of(self.leaves))

    def test_inclusion_proofs_verify(self) -> None:
        self.assertEqual(len(self.f["inclusion"]), 4)
        for v in self.f["inclusion"]:
            with self.subTest(index=v["index"]):
                res = verify_proof(self.entries[v["index"]], v["proof"], self.log)
                self.assertEqual((res.index, res.size, res.root_hash), (v["index"], 7, root_of(self.leaves)))
                p = parse_tlog_proof(v["proof"])
                if "extra" in v:
                    self.assertIsNotNone(p.extra)
                # The same proof does not prove any other entry.
                other = self.entries[(v["index"] + 1) % 7]
                with self.assertRaises(VerificationError):
                    verify_proof(other, v["proof"], self.log)

    def test_consistency_proofs_verify(self) -> None:
        self.assertEqual(len(self.f["consistency"]), 7)
        for v in self.f["consistency"]:
            with self.subTest(size1=v["size1"], size2=v["size2"]):
                cp1, cp2 = verify_consistency(v["checkpoint1"], v["checkpoint2"], v["proof"], self.log)
                self.assertEqual((cp1.size, cp2.size), (v["size1"], v["size2"]))
                self.assertEqual(cp1.root_hash, root_of(self.leaves[: v["size1"]]))
                self.assertEqual(cp2.root_hash, root_of(self.leaves[: v["size2"]]))
                hashes = parse_hash_lines(v["proof"])
                if hashes:
                    # Any changed hash breaks it.
                    bad = [bytes([hashes[0][0] ^ 1]) + hashes[0][1:]] + hashes[1:]
                    with self.assertRaises(VerificationError):
                        merkle_consistency(v["size1"], v["size2"], bad, cp1.root_hash, cp2.root_hash)
                    with self.assertRaises(VerificationError):
                        merkle_consistency(v["size1"], v["size2"], hashes[:-1], cp1.root_hash, cp2.root_hash)
                if v["size1"] < v["size2"] and v["size1"] > 0:
                    # Swapped checkpoints are refused.
                    with self.assertRaises(VerificationError):
                        verify_consistency(v["checkpoint2"], v["checkpoint1"], v["proof"], self.log)

    def test_rejects_are_refused(self) -> None:
        self.assertEqual(len(self.f["rejects"]), 13)
        for r in self.f["rejects"]:
            with self.subTest(r["name"]):
                entry = self.entries[r.get("entry_index", r["from_index"])]
                with self.assertRaises(VerificationError) as cm:
                    verify_proof(entry, r["proof"], self.log)
                # The refusal is for the same stage as the Go verifier's.
                stage = r["go_error"].split(":")[0]
                self.assertTrue(str(cm.exception).startswith(stage), (str(cm.exception), r["go_error"]))


if __name__ == "__main__":
    unittest.main()
