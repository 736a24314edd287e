"""signed.json: signing keys from seeds, the annal/signed-request/v1
statement (a sealed action stated with its commitment), the Ed25519
signature and the Annal-Signature header."""

import os
import stat
import tempfile
import unittest

from annal.errors import VerificationError
from annal.note import VerifierKey
from annal.signing import SigningKey, signature_header, signed_statement

from ._vectors import load


class SignedRequestVectors(unittest.TestCase):
    f = load("signed.json")

    def test_vectors(self) -> None:
        self.assertEqual(len(self.f["vectors"]), 3)
        for v in self.f["vectors"]:
            with self.subTest(v["name"]):
                k = SigningKey(v["key_name"], bytes.fromhex(v["seed_hex"]))
                self.assertEqual(str(k.verifier), v["verifier_key"])
                self.assertEqual(f"{k.verifier.key_id:08x}", v["key_id"])
                self.assertEqual(SigningKey.parse(k.private_key()).verifier, k.verifier)
                stmt = signed_statement(v["origin"], v["by"], v["nonce"], v["time"], v["method"], v["path"],
                                        v.get("body"))
                self.assertEqual(stmt.decode("utf-8"), v["statement"])
                self.assertEqual(stmt.split(b"\n", 1)[1].decode("utf-8"),
                                 v["statement"].split("\n", 1)[1])
                self.assertIn('"request":' + v["request"] + ',', v["statement"])
                sig = k.sign(stmt)
                self.assertEqual(signature_header(k, v["nonce"], v["time"], sig), v["header"])
                # The signature verifies with the verifier key alone, and not over other bytes.
                VerifierKey.parse(v["verifier_key"]).verify(stmt, sig)
                with self.assertRaises(VerificationError):
                    VerifierKey.parse(v["verifier_key"]).verify(stmt + b" ", sig)


class KeyFiles(unittest.TestCase):
    """SigningKey.generate_file writes what `annal keys generate FILE` does:
    the private key (mode 0600, never overwritten) and the verifier key in
    FILE's name with .pub; SigningKey.load reads it back."""

    def test_generate_then_load(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "agent.key")
            k = SigningKey.generate_file(path, "my-agent-key")
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            self.assertTrue(text.startswith(f"PRIVATE+KEY+my-agent-key+{k.verifier.key_id:08x}+"))
            self.assertTrue(text.endswith("\n"))
            with open(os.path.join(d, "agent.pub"), encoding="utf-8") as f:
                self.assertEqual(f.read(), str(k.verifier) + "\n")
            loaded = SigningKey.load(path)
            self.assertEqual(loaded.verifier, k.verifier)
            k.verifier.verify(b"msg", loaded.sign(b"msg"))
            with self.assertRaises(FileExistsError):
                SigningKey.generate_file(path)
            self.assertEqual(SigningKey.load(path).verifier, k.verifier)
            with open(os.path.join(d, "bad.key"), "w", encoding="utf-8") as f:
                f.write(text.replace("PRIVATE+KEY", "PUBLIC+KEY"))
            with self.assertRaises(ValueError):
                SigningKey.load(os.path.join(d, "bad.key"))


if __name__ == "__main__":
    unittest.main()
