"""ML-DSA-44 cosignatures from a real annal-witness (ANNAL_WITNESS, built by
.ci/test) in front of a real annald (ANNAL_ANNALD): testvectors/ has no
ML-DSA-44 known answers, so the witness's own signatures stand in for them."""

import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from typing import List

from annal.client import Client
from annal.errors import VerificationError
from annal.note import ALG_COSIGNATURE_V1, ALG_MLDSA44, Policy, VerifierKey, open_checkpoint
from annal.proof import parse_tlog_proof, verify_proof

from ._services import Server, annald, binary, free_port


class WitnessedProofs(unittest.TestCase):
    dir: str
    log_key: str
    witness_keys: List[VerifierKey]
    root: Client

    @classmethod
    def setUpClass(cls) -> None:
        witness_bin = binary("ANNAL_WITNESS")
        binary("ANNAL_ANNALD")
        cls.dir = tempfile.mkdtemp()
        cls.addClassCleanup(shutil.rmtree, cls.dir, ignore_errors=True)
        data = os.path.join(cls.dir, "data")
        # annald's first start makes the log key the witness must know.
        first, _ = annald(data)
        first.stop()
        with open(os.path.join(data, "log.pub"), encoding="utf-8") as f:
            cls.log_key = f.read().strip()
        with open(os.path.join(data, "origin"), encoding="utf-8") as f:
            origin = f.read().strip()
        wdata = os.path.join(cls.dir, "witness")
        wurl = f"http://127.0.0.1:{free_port()}"
        subprocess.run([witness_bin, "logs", "add", "--data", wdata, "--origin", origin, "--key", cls.log_key],
                       check=True, capture_output=True)
        witness = Server([witness_bin, "serve", "--data", wdata, "--listen", wurl[len("http://"):],
                          "--name", "witness.test/w1", "--gossip-interval", "0"], wdata + ".log")
        cls.addClassCleanup(witness.stop)
        cls.witness_keys = []
        for _ in range(300):
            with open(wdata + ".log", encoding="utf-8") as f:
                found = re.findall(r"verifier key (\S+)", f.read())
            if len(found) == 2:
                cls.witness_keys = [VerifierKey.parse(k) for k in found]
                break
            if witness.proc.poll() is not None:
                break
            time.sleep(0.1)
        if len(cls.witness_keys) != 2:
            raise AssertionError("annal-witness printed no verifier keys")
        policy = os.path.join(cls.dir, "policy.txt")
        with open(policy, "w", encoding="utf-8") as f:
            # The witness named by its ML-DSA-44 key: annald keeps the
            # cosignature lines of the keys its policy names.
            f.write(f"log {cls.log_key}\nwitness w1 {cls.witness_keys[1]} {wurl}\nquorum w1\n")
        server, url = annald(data, "--witness-policy", policy)
        cls.addClassCleanup(server.stop)
        with open(os.path.join(data, "root.credential"), encoding="utf-8") as f:
            cls.root = Client(url, f.read().strip())

    def policy(self, key: VerifierKey) -> Policy:
        return Policy.parse(f"log {self.log_key}\nwitness w1 {key}\nquorum w1\n")

    def test_mldsa44_cosigned_proof(self) -> None:
        ed, ml = self.witness_keys
        self.assertEqual((ed.alg, ml.alg), (ALG_COSIGNATURE_V1, ALG_MLDSA44))
        r = self.root.submit("observe", "workspace/readme.md", wait_published=True)
        self.assertIn("proof", r, r.get("proof_error"))
        entry = self.root.event(r["index"])
        res = verify_proof(entry, r["proof"], self.policy(ml))
        self.assertEqual(res.index, r["index"])
        _, note = open_checkpoint(parse_tlog_proof(r["proof"]).checkpoint, self.log_key, [ml])
        self.assertIn(ml, note.verified)
        # The ML-DSA-44 signature is checked: one changed base64 digit is refused.
        lines = r["proof"].split("\n")
        i = next(i for i, line in enumerate(lines) if line.startswith("\u2014 witness.test/w1 "))
        self.assertGreater(len(lines[i]), 3000)  # 4 + 8 + 2420 bytes in base64
        pos = len(lines[i]) - 40
        lines[i] = lines[i][:pos] + ("A" if lines[i][pos] != "A" else "B") + lines[i][pos + 1:]
        with self.assertRaises(VerificationError) as cm:
            verify_proof(entry, "\n".join(lines), self.policy(ml))
        self.assertIn("does not verify", str(cm.exception))
        # The witness's Ed25519 key signed nothing here: that policy's quorum is not met.
        with self.assertRaises(VerificationError) as cm:
            verify_proof(entry, r["proof"], self.policy(ed))
        self.assertIn("quorum", str(cm.exception))

if __name__ == "__main__":
    unittest.main()
