"""The HTTP client against a real annald: the binary named by
ANNAL_ANNALD (.ci/test builds it), started on 127.0.0.1 on a fresh data
folder. Skipped when ANNAL_ANNALD is unset, unless ANNAL_REQUIRE_SERVICES=1."""

import base64
import contextlib
import io
import json
import os
import re
import unittest

from annal.client import Client
from annal.errors import APIError, DeniedError, NotFoundError, VerificationError
from annal.merkle import leaf_hash
from annal.note import open_checkpoint
from annal.proof import verify_proof
from annal.signing import SigningKey, signed_statement

from ._services import Server, annald, annald_folder, root_credential


class ClientAgainstAnnald(unittest.TestCase):
    dir: str
    data: str
    server: Server
    url: str
    root: Client
    log_key: str
    agent_id: str
    agent: Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.dir, cls.data = annald_folder(cls)
        cls.server, cls.url = annald(cls.data)
        cls.addClassCleanup(cls.server.stop)
        cls.root = Client(cls.url, root_credential(cls.data))
        with open(os.path.join(cls.data, "log.pub"), encoding="utf-8") as f:
            cls.log_key = f.read().strip()
        agent = cls.root.create_agent("scribe", "keeps meeting notes", energy=1000, trust=0.8,
                                      grants=[{"pattern": "workspace/**", "actions": ["create", "mutate"]}])
        cls.agent_id = agent["id"]
        cls.root.issue_envelope(agent["id"], 500, [{"pattern": "workspace/**", "actions": ["mutate"]}],
                                hold_on=[{"pattern": "workspace/release/*", "actions": ["mutate"]}])
        cls.agent = Client(cls.url, agent["credential"])

    def test_submit_receipt_and_offline_proof(self) -> None:
        r = self.agent.submit("mutate", "workspace/notes.md", {"text": "hello"})
        self.assertEqual(r["status"], "committed")
        res = self.agent.verify_receipt(r, self.log_key)
        self.assertEqual(res.index, r["index"])
        self.assertGreater(res.size, r["index"])
        # The proof checks offline, and not for other bytes.
        entry, proof = self.agent.event(r["index"]), self.agent.wait_proof(r["index"])
        self.assertEqual(leaf_hash(entry).hex(), r["leaf_hash"])
        verify_proof(entry, proof, self.log_key)
        with self.assertRaises(VerificationError):
            verify_proof(entry.replace(b"hello", b"hellp"), proof, self.log_key)
        # A key the caller does not trust is not taken from the server.
        other = "log.example/other+0124a124+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4"
        with self.assertRaises(VerificationError):
            self.agent.verify_receipt(r, other)

    def test_submit_wait_published_carries_the_proof(self) -> None:
        r = self.agent.submit("mutate", "workspace/notes.md", {"text": "again"}, wait_published=True)
        self.assertTrue(r["proof"].startswith("c2sp.org/tlog-proof@v1\n"))
        res = verify_proof(self.agent.event(r["index"]), r["proof"], self.log_key)
        self.assertEqual(res.index, r["index"])

    def test_log_only_grew(self) -> None:
        self.agent.submit("mutate", "workspace/notes.md", {"text": "before"}, wait_published=True)
        old = self.agent.checkpoint()
        self.agent.submit("mutate", "workspace/notes.md", {"text": "after"}, wait_published=True)
        new = self.agent.verify_grew(old, self.log_key)
        self.assertGreater(int(new.split(b"\n")[1]), int(old.split(b"\n")[1]))
        # A checkpoint of another history, signed with the log's own key (an
        # equivocating log), is refused: no consistency proof leads to it.
        with open(os.path.join(self.data, "log.key"), encoding="utf-8") as f:
            log_signer = SigningKey.parse(f.read())
        lines = old.split(b"\n\n")[0].split(b"\n")
        forged_text = b"\n".join([lines[0], lines[1], base64.b64encode(bytes(32))] + lines[3:]) + b"\n"
        sig = log_signer.verifier.key_id.to_bytes(4, "big") + log_signer.sign(forged_text)
        forged = forged_text + f"\n\u2014 {log_signer.name} {base64.b64encode(sig).decode()}\n".encode()
        open_checkpoint(forged, self.log_key)  # the signature is good
        with self.assertRaises(VerificationError) as cm:
            self.agent.verify_grew(forged, self.log_key)
        self.assertIn("consistency", str(cm.exception))

    def test_denial_is_a_typed_error(self) -> None:
        with self.assertRaises(DeniedError) as cm:
            self.agent.submit("execute", "elsewhere/run", {"argv": ["rm"]})
        e = cm.exception
        self.assertEqual(e.status, 403)
        self.assertTrue(e.stage and e.gate, vars(e))
        self.assertIsNotNone(e.denial_index)
        assert e.denial_index is not None
        denied = self.root.event(e.denial_index)
        self.assertIn(b'"kind":"action.denied"', denied)
        self.assertIn(f'"stage":"{e.stage}/{e.gate}"'.encode(), denied)

    def test_hold_approved_by_a_human(self) -> None:
        r = self.agent.submit("mutate", "workspace/release/v1")
        self.assertEqual(r["status"], "held")
        self.assertEqual(self.agent.hold(r["hold_id"])["status"], "pending")
        self.root.answer_hold(r["hold_id"], "approve", "release checked")
        h = self.agent.wait_hold(r["hold_id"], timeout=10)
        self.assertEqual(h["status"], "approved")

    def test_readme_example_runs_as_pasted(self) -> None:
        readme = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
        with open(readme, encoding="utf-8") as f:
            code = re.findall(r"```python\n(.*?)```", f.read(), re.S)[1]
        self.assertIn('"http://127.0.0.1:7420"', code)
        self.assertEqual(len(code.strip().splitlines()), 5)
        with open(os.path.join(os.path.dirname(readme), "..", "..", "README.md"), encoding="utf-8") as f:
            self.assertIn("```python\n" + code + "```", f.read())  # the repository's README shows the same
        code = code.replace('"http://127.0.0.1:7420"', repr(self.url))  # this test's annald
        cwd = os.getcwd()
        os.environ["ANNAL_CREDENTIAL"] = self.agent.credential
        out = io.StringIO()
        try:
            os.chdir(self.dir)
            os.symlink(self.data, "annal-data")
            with contextlib.redirect_stdout(out):
                exec(compile(code, "README.md", "exec"), {})
        finally:
            os.chdir(cwd)
            del os.environ["ANNAL_CREDENTIAL"]
        self.assertEqual(out.getvalue(), "True\n")

    def test_not_found(self) -> None:
        with self.assertRaises(NotFoundError):
            self.agent.hold("hold-0000000000000000")
        with self.assertRaises(APIError):
            self.root.event(10 ** 9)

    def test_signed_requests(self) -> None:
        key = SigningKey.generate("signer-key")
        a = self.root.create_agent("signer", "signs what it does", energy=1000, trust=0.8,
                                   grants=[{"pattern": "workspace/**", "actions": ["create", "mutate"]}],
                                   signing_key=str(key.verifier), require_signed=True)
        self.root.issue_envelope(a["id"], 500, [{"pattern": "workspace/**", "actions": ["mutate"]}])
        with self.assertRaises(APIError) as cm:
            Client(self.url, a["credential"]).submit("mutate", "workspace/signed.md", {"n": 1})
        self.assertIn(cm.exception.status, (401, 403), vars(cm.exception))
        wrong = Client(self.url, a["credential"], signing_key=SigningKey.generate("signer-key"))
        with self.assertRaises(APIError):
            wrong.submit("mutate", "workspace/signed.md", {"n": 2})
        signed = Client(self.url, a["credential"], signing_key=key.private_key())  # the key file's text
        r = signed.submit("mutate", "workspace/signed.md", {"n": 3, "x": [1.5, "\u00e9"]}, wait_published=True)
        self.assertEqual(r["status"], "committed")
        entry = signed.event(r["index"])
        self.assertIn(b'"signed":{', entry)
        s = json.loads(entry)["signed"]
        self.assertEqual((s["by"], s["key"]), (a["id"], f"{key.verifier.key_id:08x}"))
        # The event's signature verifies over the statement rebuilt from the event.
        rq = s["request"]
        stmt = signed_statement(self.root.info()["origin"], s["by"], s["nonce"], s["time"], rq["method"], rq["path"],
                                rq.get("body"))
        key.verifier.verify(stmt, base64.b64decode(s["sig"]))
        verify_proof(entry, r["proof"], self.log_key)


class RetriesAgainstAnnald(unittest.TestCase):
    """A rate-limited agent (annald --rate-limit 2=1/1: one request a
    second for Ring 2): the 429 is a typed, retryable error, and a client
    with retries sends again after Retry-After and gets its receipt."""

    dir: str
    url: str
    credential: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.dir, data = annald_folder(cls)
        server, cls.url = annald(data, "--rate-limit", "2=1/1")
        cls.addClassCleanup(server.stop)
        root = Client(cls.url, root_credential(data))
        agent = root.create_agent("hasty", "sends too fast", energy=1000, trust=0.8,
                                  grants=[{"pattern": "workspace/**", "actions": ["create", "mutate"]}])
        root.issue_envelope(agent["id"], 500, [{"pattern": "workspace/**", "actions": ["mutate"]}])
        cls.credential = agent["credential"]

    def test_rate_limited_then_retried(self) -> None:
        once = Client(self.url, self.credential)
        with self.assertRaises(APIError) as cm:
            for _ in range(5):
                once.submit("mutate", "workspace/a.md", {"n": 1})
        e = cm.exception
        self.assertEqual(e.status, 429, vars(e))
        self.assertFalse(e.outcome_unknown)
        self.assertTrue(e.retry_after is not None or e.retryable, vars(e))
        patient = Client(self.url, self.credential, attempts=6, max_wait=2.0)
        for _ in range(3):
            self.assertEqual(patient.submit("mutate", "workspace/a.md", {"n": 2})["status"], "committed")


if __name__ == "__main__":
    unittest.main()
