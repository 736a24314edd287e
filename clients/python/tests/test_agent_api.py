"""What an agent does through the client, against a real annald (the
binary named by ANNAL_ANNALD, with --keep-blobs): execute intents and
results (allowed, denied, held and approved, held and rejected), observes,
who it is and its budget, envelopes and holds, the history page by page,
blobs, the agent file system (plain and signed writes) and sealed payloads.
Skipped when ANNAL_ANNALD is unset, unless ANNAL_REQUIRE_SERVICES=1."""

import base64
import contextlib
import io
import json
import os
import re
import tempfile
import threading
import time
import unittest
from typing import Any, Dict, List

from annal.client import Client
from annal.errors import APIError, DeniedError, HoldPendingError, HoldRefusedError, NotFoundError
from annal.execute import Result, command_oid, oid_of, tool_call_oid, tool_result_oid
from annal.jcs import canonicalize
from annal.merkle import leaf_hash
from annal.signing import SigningKey, seal_commitment, signed_statement
from annal.vfspath import ReadOnlyPathError

from ._services import Server, annald, annald_folder, root_credential

TOOLS = [{"pattern": "tools/**", "actions": ["execute", "observe"]},
         {"pattern": "workspace/**", "actions": ["create", "mutate"]},
         {"pattern": "crm/**", "actions": ["create"]}]


class AgentAgainstAnnald(unittest.TestCase):
    root: Client
    url: str
    dir: str
    data: str
    server: Server

    @classmethod
    def setUpClass(cls) -> None:
        cls.dir, cls.data = annald_folder(cls)
        cls.server, cls.url = annald(cls.data, "--keep-blobs")
        cls.addClassCleanup(cls.server.stop)
        cls.root = Client(cls.url, root_credential(cls.data))

    def agent(self, name: str, **fields: Any) -> Client:
        """A new agent with the TOOLS grants and an envelope of them that
        holds tools/held/**; its client signs with signing_key if given."""
        key = fields.pop("key", None)
        if key is not None:
            fields["signing_key"] = str(key.verifier)
        a = self.root.create_agent(name, "uses tools", energy=10_000, trust=0.8, grants=TOOLS, **fields)
        env = self.root.issue_envelope(a["id"], 5_000, TOOLS, hold_on=[{"pattern": "tools/held/**",
                                                                       "actions": ["execute"]}])
        c = Client(self.url, a["credential"], signing_key=key)
        c.envelope_id = env["id"]  # type: ignore[attr-defined]
        return c

    def entry(self, index: int) -> Dict[str, Any]:
        out: Dict[str, Any] = json.loads(self.root.event(index))
        return out

    def test_execute_intent_then_result_with_matching_oids(self) -> None:
        c = self.agent("tooler")
        args = {"path": "/tmp/x/notes.md", "content": "hi\n"}
        input_oid = tool_call_oid("filesystem", "write_file", args)
        intent = c.decide_intent("tools/filesystem/write_file", input_oid,
                                 about={"server": "filesystem", "tool": "write_file", "arguments": args})
        self.assertEqual(intent.hold_id, "")
        ev = self.entry(intent.index)
        self.assertEqual(ev["action"]["payload"], {"phase": "intent", "input_oid": input_oid, "server": "filesystem",
                                                   "tool": "write_file", "arguments": args})
        result = {"content": [{"type": "text", "text": "wrote 3 bytes"}], "_meta": {"x": 1}}
        out = tool_result_oid(result)
        rc = c.record_result(intent, Result(output_oid=out, artifact_hash=out, output_bytes=13))
        self.assertEqual(rc["status"], "committed")
        p = self.entry(rc["index"])["action"]["payload"]
        self.assertEqual((p["intent"], p["input_oid"], p["output_oid"], p["exit_code"], p["output_bytes"]),
                         (intent.index, input_oid, out, 0, 13))
        # A command's OIDs as annal exec computes them.
        cmd = c.decide_intent("tools/exec/make", command_oid(["make", "test"], b""), about={"argv": ["make", "test"]})
        rc = c.record_result(cmd, Result(output_oid=oid_of(b"ok\n"), artifact_hash=oid_of(b"ok\n"), exit_code=2,
                                         output_bytes=3, about={"stderr_oid": oid_of(b"")}))
        p = self.entry(rc["index"])["action"]["payload"]
        self.assertEqual((p["exit_code"], p["stderr_oid"], p["intent"]), (2, oid_of(b""), cmd.index))

    def test_execute_denied_is_the_kernels_error_and_logged(self) -> None:
        c = self.agent("denied")
        with self.assertRaises(DeniedError) as cm:
            c.decide_intent("elsewhere/rm", command_oid(["rm", "-rf", "/"]), about={"argv": ["rm", "-rf", "/"]})
        e = cm.exception
        self.assertEqual(e.status, 403)
        self.assertTrue(e.stage and e.gate, vars(e))
        assert e.denial_index is not None
        denied = self.entry(e.denial_index)
        self.assertEqual(denied["kind"], "action.denied")
        self.assertEqual(denied["action"]["target"], "elsewhere/rm")

    def test_execute_held_runs_only_once_a_human_approves(self) -> None:
        c = self.agent("careful")
        seen: List[str] = []

        def human_approves_later(hold_id: str) -> None:
            seen.append(hold_id)
            self.assertEqual(c.hold(hold_id)["status"], "pending")
            self.assertIn(hold_id, [h["id"] for h in c.holds("pending")])
            threading.Timer(0.3, self.root.answer_hold, (hold_id, "approve", "looks fine")).start()

        oid = tool_call_oid("deploy", "release", {"v": 2})
        started = time.monotonic()
        intent = c.decide_intent("tools/held/release", oid, on_held=human_approves_later, poll=0.05)
        self.assertGreaterEqual(time.monotonic() - started, 0.3)  # it waited for the human
        self.assertEqual([intent.hold_id], seen)
        approval = self.entry(intent.index)  # the result names the approving entry
        self.assertEqual(approval["hold"]["id"], intent.hold_id)
        self.assertEqual(approval["hold"]["decision"], "approve")
        rc = c.record_result(intent, Result(output_oid=oid, artifact_hash=oid))
        self.assertEqual(self.entry(rc["index"])["action"]["payload"]["intent"], intent.index)

    def test_execute_held_and_rejected_or_unanswered(self) -> None:
        c = self.agent("rejected")
        with self.assertRaises(HoldRefusedError) as cm:
            c.decide_intent("tools/held/drop", oid_of(b"x"), poll=0.05,
                            on_held=lambda h: self.root.answer_hold(h, "reject", "not today"))
        self.assertEqual(cm.exception.status, "rejected")
        self.assertIn("not today", str(cm.exception))
        with self.assertRaises(HoldPendingError) as pending:
            c.decide_intent("tools/held/drop", oid_of(b"y"), timeout=0)
        self.assertEqual(c.hold(pending.exception.hold_id)["status"], "pending")

    def test_observe_read_only_call(self) -> None:
        c = self.agent("reader")
        rc = c.observe("tools/filesystem/read_file")
        self.assertEqual((rc["status"], rc["type"]), ("committed", "observe"))
        self.assertEqual(self.entry(rc["index"])["action"], {"type": "observe", "target": "tools/filesystem/read_file"})

    def test_who_am_i_budget_envelopes_holds(self) -> None:
        c = self.agent("counter")
        me = c.who_am_i()
        self.assertEqual(c.actor(me["id"])["id"], me["id"])
        self.assertIn(me["id"], [a["id"] for a in self.root.actors()])
        before = c.budget()
        self.assertEqual(before["actor"], me["id"])
        [env] = before["envelopes"]
        self.assertEqual((env["id"], env["budget"], env["remaining"]), (c.envelope_id, 5_000, 5_000))  # type: ignore
        rc = c.submit("mutate", "workspace/a.md", {"n": 1})
        after = c.budget()
        self.assertEqual(after["envelopes"][0]["remaining"], 5_000 - rc["cost"])
        self.assertEqual(after["balance"], before["balance"] - rc["cost"])
        self.assertEqual(after["ring"]["agent"], me["id"])
        self.assertEqual([v["id"] for v in c.envelopes()], [c.envelope_id])  # type: ignore[attr-defined]
        self.root.revoke_envelope(c.envelope_id, "done")  # type: ignore[attr-defined]
        self.assertTrue(c.envelopes()[0]["revoked"])
        with self.assertRaises(DeniedError):
            c.submit("mutate", "workspace/a.md", {"n": 2})

    def test_actors_reads_every_page(self) -> None:
        made = [self.root.create_agent(f"page{i}", "paging")["id"] for i in range(210)]
        ids = [a["id"] for a in self.root.actors()]
        self.assertEqual(len(set(ids)), len(ids), "an actor came back twice")
        self.assertGreater(len(ids), 200, "the client read one page")
        self.assertFalse(set(made) - set(ids), "created actors are missing from the list")
        self.assertEqual(sorted(ids), ids)

    def test_may_ever_and_status(self) -> None:
        c = self.agent("frozen")
        me = c.who_am_i()["id"]
        may = c.may_ever([{"type": "mutate", "target": "workspace/x.md"}, {"type": "mutate", "target": "elsewhere/x"}])
        self.assertEqual([m["allowed"] for m in may], [True, False])
        self.root.set_status(me, "frozen", "paused for review")
        self.assertEqual(c.who_am_i()["status"], "frozen")
        with self.assertRaises(APIError):
            c.submit("mutate", "workspace/x.md", {"n": 1})
        self.root.set_status(me, "active")
        self.assertEqual(c.submit("mutate", "workspace/x.md", {"n": 2})["status"], "committed")

    def test_history_pages(self) -> None:
        c = self.agent("historian")
        indices = [c.submit("mutate", f"workspace/h{i}.md", {"i": i})["index"] for i in range(5)]
        me = c.who_am_i()["id"]
        page = c.history(actor=me, type="mutate", order="oldest", limit=2)
        self.assertEqual([it["index"] for it in page["events"]], indices[:2])
        self.assertEqual(page["events"][0]["event"]["action"]["payload"], {"i": 0})
        for it in page["events"]:  # an event is its entry, parsed: its canonical form is the logged bytes
            self.assertEqual(leaf_hash(canonicalize(it["event"])).hex(), it["leaf_hash"])
            self.assertEqual(canonicalize(it["event"]), self.root.event(it["index"]))
        self.assertIsNotNone(page.get("next_cursor"))
        self.assertEqual([it["index"] for it in c.history_all(actor=me, type="mutate", order="oldest", limit=2)],
                         indices)
        newest = c.history(actor=me, type="mutate", order="newest", limit=1)["events"]
        self.assertEqual(newest[0]["index"], indices[-1])
        with self.assertRaises(TypeError):
            c.history(colour="red")
        with self.assertRaises(APIError) as cm:  # another agent's history is not the caller's to read
            c.history(actor="root")
        self.assertEqual(cm.exception.status, 403)

    def test_blobs(self) -> None:
        c = self.agent("uploader")
        data = b"\x00 a blob \xff" * 100
        oid = c.put_blob(data)
        self.assertEqual(oid, oid_of(data))
        self.assertEqual(self.root.blob(oid), data)
        with self.assertRaises(APIError):  # blobs are read by humans only
            c.blob(oid)
        with self.assertRaises(NotFoundError):
            self.root.blob(oid_of(b"never stored"))

    def test_agent_file_system(self) -> None:
        c = self.agent("memo")
        me = c.who_am_i()["id"]
        other = self.agent("peer")
        peer = other.who_am_i()["id"]
        uri = f"vfs://{me}/mem/semantic/facts.md"
        out = c.vfs_put(uri, b"the build runs on two cores\n")
        self.assertEqual((out["oid"], out["receipt"]["status"]),
                         (oid_of(b"the build runs on two cores\n"), "committed"))
        self.assertEqual(self.entry(out["receipt"]["index"])["action"]["payload_hash"], out["oid"])
        data, f = c.vfs_read(uri)
        self.assertEqual(data, b"the build runs on two cores\n")
        assert f is not None
        self.assertEqual((f["oid"], f["index"]), (out["oid"], out["receipt"]["index"]))
        listing = c.vfs_list(f"vfs://{me}/")
        self.assertEqual([x["path"] for x in listing["files"]], ["mem/semantic/facts.md"])
        audit, none = c.vfs_read(f"vfs://{me}/audit/events.jsonl")
        self.assertIsNone(none)
        self.assertIn(out["receipt"]["index"], [json.loads(line)["index"] for line in audit.splitlines()])
        with self.assertRaises(ReadOnlyPathError):
            c.vfs_put(f"vfs://{me}/policy/active.json", b"{}")
        with self.assertRaises(ValueError):
            c.vfs_put(f"vfs://{me}/mem/working/../x", b"")
        with self.assertRaises(DeniedError):  # another agent's memory is not ours to write
            c.vfs_put(f"vfs://{peer}/mem/working/x", b"mine")
        with self.assertRaises(NotFoundError):
            c.vfs_read(f"vfs://{me}/mem/working/absent")

    def test_signed_vfs_write(self) -> None:
        key = SigningKey.generate("memo-key")
        c = self.agent("signed-memo", key=key, require_signed=True)
        me = c.who_am_i()["id"]
        out = c.vfs_put(f"vfs://{me}/mem/working/scratch", b"half a thought\n", c.envelope_id)  # type: ignore
        ev = self.entry(out["receipt"]["index"])
        s = ev["signed"]
        # The write is signed as the action it is (an event leaves out a
        # request that is its own action): the signature verifies over it.
        self.assertEqual(s.get("request", "the action"), "the action")
        stmt = signed_statement(self.root.info()["origin"], me, s["nonce"], s["time"], "POST", "/v1/actions",
                                ev["action"])
        key.verifier.verify(stmt, base64.b64decode(s["sig"]))
        unsigned = Client(self.url, c.credential)
        with self.assertRaises(APIError):
            unsigned.vfs_put(f"vfs://{me}/mem/working/scratch", b"unsigned")

    def test_sealed_payload_signed_and_read_back(self) -> None:
        key = SigningKey.generate("crm-key")
        c = self.agent("crm", key=key)
        payload = {"name": "Alice Liddell", "email": "alice@example.org"}
        rc = c.submit("create", "crm/customers/42.json", payload, seal=True, subject="customer-42")
        ev = self.entry(rc["index"])
        self.assertNotIn("payload", ev["action"])
        commitment = seal_commitment(base64.b64decode(rc["salt"]), payload)
        self.assertEqual(ev["action"]["sealed"], {"commitment": commitment, "subject": "customer-42"})
        self.assertNotIn(b"alice@example.org", self.root.event(rc["index"]))
        self.assertEqual(ev["signed"]["request"]["body"]["sealed"]["commitment"], commitment)
        [item] = c.history(actor=c.who_am_i()["id"], type="create", limit=1)["events"]
        self.assertEqual((item["index"], item["sealed_payload"]), (rc["index"], payload))
        self.root.erase_subject("customer-42", "erasure request")
        [item] = c.history(actor=c.who_am_i()["id"], type="create", limit=1)["events"]
        self.assertTrue(item["erased"])
        self.assertNotIn("sealed_payload", item)
        # Without a signing key, annald draws the salt; the actor is the subject.
        plain = self.agent("crm-plain")
        rc = plain.submit("create", "crm/customers/43.json", "call back at 5", seal=True)
        self.assertEqual(self.entry(rc["index"])["action"]["sealed"]["subject"], plain.who_am_i()["id"])

    def test_readme_blocks_run_in_order_as_pasted(self) -> None:
        """Every client block of the README after the offline one, run in
        one namespace as a reader pasting them in turn would, against this
        annald, as an agent with the grants they use."""
        readme = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
        with open(readme, encoding="utf-8") as f:
            blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)[1:]
        self.assertGreaterEqual(len(blocks), 8)
        c = self.agent("readme")
        cwd = os.getcwd()
        out = io.StringIO()
        ns: Dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as d:
            os.environ["ANNAL_CREDENTIAL"] = c.credential
            try:
                os.chdir(d)
                os.symlink(self.data, "annal-data")
                with contextlib.redirect_stdout(out):
                    for i, code in enumerate(blocks):
                        if "Client(" in code:
                            self.assertIn('"http://127.0.0.1:7420"', code)
                        code = code.replace('"http://127.0.0.1:7420"', repr(self.url))
                        exec(compile(code, f"README.md block {i + 2}", "exec"), ns)
                self.assertTrue(os.path.exists("agent.pub"))
            finally:
                os.chdir(cwd)
                del os.environ["ANNAL_CREDENTIAL"]
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[0], "True")
        self.assertRegex(lines[1], r"^denied: \S+ \S+ True$")
        self.assertRegex(lines[2], r"^left: \[\d+\]$")
        self.assertEqual(lines[3:], ["live: True", "True ['mem/semantic/facts.md']", "sealed: True"])


if __name__ == "__main__":
    unittest.main()
