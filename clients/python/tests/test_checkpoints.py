"""checkpoints.json: keys, signed checkpoints and the notes a reader must refuse."""

import base64
import hashlib
import unittest

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from annal.errors import VerificationError
from annal.note import ALG_ED25519, Checkpoint, VerifierKey, key_id, open_checkpoint, parse_note

from ._vectors import keys, load


class CheckpointVectors(unittest.TestCase):
    f = load("checkpoints.json")

    def test_keys_derive_from_seeds(self) -> None:
        self.assertEqual(len(self.f["keys"]), 4)
        for k in self.f["keys"]:
            with self.subTest(k["label"]):
                seed = bytes.fromhex(k["seed_hex"])
                pub = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(
                    serialization.Encoding.Raw, serialization.PublicFormat.Raw)
                self.assertEqual(pub.hex(), k["public_key_hex"])
                self.assertEqual(f"{key_id(k['name'], ALG_ED25519, pub):08x}", k["key_id"])
                vk = VerifierKey(k["name"], int(k["key_id"], 16), ALG_ED25519, pub)
                self.assertEqual(str(vk), k["verifier_key"])
                self.assertEqual(VerifierKey.parse(k["verifier_key"]), vk)
                priv = base64.b64encode(b"\x01" + seed).decode()
                self.assertEqual(k["private_key"], f"PRIVATE+KEY+{k['name']}+{k['key_id']}+{priv}")

    def test_signed_checkpoints_are_accepted(self) -> None:
        ks = keys(self.f)
        seeds = {k["label"]: bytes.fromhex(k["seed_hex"]) for k in self.f["keys"]}
        self.assertEqual(len(self.f["vectors"]), 5)
        for v in self.f["vectors"]:
            with self.subTest(v["name"]):
                body = Checkpoint(v["origin"], v["size"], bytes.fromhex(v["root_hash_hex"])).marshal()
                if v["body"].count("\n") == 3:
                    self.assertEqual(body.decode(), v["body"])
                # Ed25519 is deterministic: signing the body by hand gives the note exactly.
                note = v["body"] + "\n"
                for s in v["signers"]:
                    sk = Ed25519PrivateKey.from_private_bytes(seeds[s])
                    k = ks[s]
                    raw = k.key_id.to_bytes(4, "big") + sk.sign(v["body"].encode())
                    note += f"\u2014 {k.name} {base64.b64encode(raw).decode()}\n"
                self.assertEqual(note, v["signed_note"])
                cp, n = open_checkpoint(v["signed_note"], ks[v["signers"][0]])
                self.assertEqual((cp.origin, cp.size, cp.root_hash.hex()), (v["origin"], v["size"], v["root_hash_hex"]))
                self.assertEqual(cp.marshal().decode(), v["body"])
                self.assertEqual(n.verified, [ks[v["signers"][0]]])

    def test_rejects_are_refused(self) -> None:
        ks = keys(self.f)
        self.assertEqual(len(self.f["rejects"]), 14)
        for r in self.f["rejects"]:
            with self.subTest(r["name"]):
                with self.assertRaises(VerificationError) as cm:
                    open_checkpoint(r["signed_note"], ks[r["verifier"]])
                # The Go reader's error and ours name the same failure.
                go = r["go_error"]
                ours = str(cm.exception)
                for marker in ("leading zero", "64 bits", "is empty", "well-formed signed note",
                               "has no signature by log key", "does not verify", "is not the log key's name",
                               "want 32", "want at least 3"):
                    if marker in go:
                        self.assertIn(marker, ours)


class NoteParsing(unittest.TestCase):
    def test_signature_line_needs_em_dash(self) -> None:
        with self.assertRaises(VerificationError):
            parse_note(b"a\n\n- a AAAAAAAA\n")

    def test_unpadded_base64_is_refused(self) -> None:
        with self.assertRaises(VerificationError):
            parse_note("a\n\n\u2014 a AAAAAAA\n".encode())


if __name__ == "__main__":
    unittest.main()
