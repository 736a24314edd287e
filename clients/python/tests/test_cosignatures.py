"""cosignatures.json: cosignature/v1 witness keys, messages and signature
lines, and cosigned checkpoints read under a c2sp.org/tlog-policy."""

import base64
import struct
import unittest

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from annal.errors import VerificationError
from annal.proof import verify_proof
from annal.note import ALG_COSIGNATURE_V1, Policy, VerifierKey, cosignature_message, key_id, open_checkpoint

from ._vectors import keys, load


def policy(log: VerifierKey, name: str, witness: str) -> Policy:
    return Policy.parse(f"log {log}\nwitness {name} {witness}\nquorum {name}\n")


class CosignatureVectors(unittest.TestCase):
    f = load("cosignatures.json")

    def setUp(self) -> None:
        self.keys = keys(self.f)
        self.log = self.keys[self.f["keys"][0]["label"]]
        self.witnesses = {w["label"]: w["verifier_key"] for w in self.f["witnesses"]}
        self.seeds = {k["label"]: bytes.fromhex(k["seed_hex"]) for k in self.f["keys"]}

    def test_witness_keys(self) -> None:
        self.assertEqual(len(self.f["witnesses"]), 2)
        for w in self.f["witnesses"]:
            with self.subTest(w["label"]):
                k = self.keys[w["label"]]
                self.assertEqual(f"{key_id(k.name, ALG_COSIGNATURE_V1, k.public_key):08x}", w["key_id"])
                cv = VerifierKey(k.name, int(w["key_id"], 16), ALG_COSIGNATURE_V1, k.public_key)
                self.assertEqual(str(cv), w["verifier_key"])

    def test_cosigned_checkpoints_are_accepted(self) -> None:
        self.assertEqual(len(self.f["vectors"]), 2)
        for v in self.f["vectors"]:
            with self.subTest(v["name"]):
                cv = VerifierKey.parse(self.witnesses[v["witness"]])
                text = v["cosigned_checkpoint"].split("\n\n")[0].encode() + b"\n"
                self.assertEqual(cosignature_message(text, v["time"]).decode(), v["message"])
                sig = Ed25519PrivateKey.from_private_bytes(self.seeds[v["witness"]]).sign(v["message"].encode())
                raw = cv.key_id.to_bytes(4, "big") + struct.pack(">Q", v["time"]) + sig
                self.assertEqual(f"\u2014 {cv.name} {base64.b64encode(raw).decode()}\n", v["signature_line"])
                self.assertTrue(v["cosigned_checkpoint"].endswith(v["signature_line"]))
                cp, cosigners = policy(self.log, v["witness"], self.witnesses[v["witness"]]).open_checkpoint(
                    v["cosigned_checkpoint"])
                self.assertEqual(cosigners, [v["witness"]])
                self.assertEqual(cp.size, v["size"])
                _, note = open_checkpoint(v["cosigned_checkpoint"], self.log, [cv])
                self.assertEqual(note.times, {cv.name: v["time"]})
                # The other witness's quorum is not met by this cosignature.
                other = next(w for w in self.witnesses if w != v["witness"])
                with self.assertRaises(VerificationError):
                    policy(self.log, other, self.witnesses[other]).open_checkpoint(v["cosigned_checkpoint"])

    def test_rejects_are_refused(self) -> None:
        self.assertEqual(len(self.f["rejects"]), 3)
        by_name = {v["name"]: v for v in self.f["vectors"]}
        for r in self.f["rejects"]:
            with self.subTest(r["name"]):
                w = by_name[r["from"]]["witness"]
                with self.assertRaises(VerificationError) as cm:
                    policy(self.log, w, self.witnesses[w]).open_checkpoint(r["cosigned_checkpoint"])
                go = r["go_error"]
                ours = str(cm.exception)
                if "does not verify" in go:
                    self.assertIn("does not verify", ours)
                if "quorum" in go:
                    self.assertIn("quorum", ours)

    def test_policy_groups(self) -> None:
        w1, w2 = self.witnesses["witness"], self.witnesses["witness2"]
        p = Policy.parse(f"log {self.log}\nwitness a {w1}\nwitness b {w2}\ngroup g 1 a b\nquorum g\n")
        for v in self.f["vectors"]:
            p.open_checkpoint(v["cosigned_checkpoint"])
        both = Policy.parse(f"log {self.log}\nwitness a {w1}\nwitness b {w2}\ngroup g all a b\nquorum g\n")
        with self.assertRaises(VerificationError):
            both.open_checkpoint(self.f["vectors"][0]["cosigned_checkpoint"])

    def test_policy_with_urls_and_proof(self) -> None:
        # A policy as annald's README writes it, URLs after the keys, checks a
        # tlog-proof whose checkpoint carries the cosignature.
        v = self.f["vectors"][0]
        p = Policy.parse(f"log {self.log} http://127.0.0.1:7420/\nwitness w1 {self.witnesses[v['witness']]} "
                         f"http://127.0.0.1:7430\nquorum w1\n")
        proof = f"c2sp.org/tlog-proof@v1\nindex 7\n\n{v['cosigned_checkpoint']}"
        with self.assertRaises(VerificationError) as cm:
            verify_proof(b"{}", proof, p)
        self.assertIn("index 7 is not inside", str(cm.exception))
        unsigned = v["cosigned_checkpoint"][: v["cosigned_checkpoint"].index(v["signature_line"])]
        with self.assertRaises(VerificationError) as cm:
            verify_proof(b"{}", f"c2sp.org/tlog-proof@v1\nindex 0\n\n{unsigned}", p)
        self.assertIn("quorum", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
