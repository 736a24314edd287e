"""signed.json: signing keys from seeds, the annal/signed-request/v1
statement (a sealed action stated with its commitment), the Ed25519
signature and the Annal-Signature header."""

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


if __name__ == "__main__":
    unittest.main()
