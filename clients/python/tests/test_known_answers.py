"""Known answers of execute.json (every OID and payload of an execute
decided before it runs), vfs.json (every write: its target, type, OID,
the statement a signed write signs, the entry's leaf hash; every refused
URI with Go's message) and sealed.json's commitments, in Python."""

import base64
import json
import unittest

from annal.execute import (Result, canonical_command, canonical_tool_call, canonical_tool_result, command_oid,
                           intent_payload, oid_of, tool_call_oid, tool_result_oid)
from annal.jcs import canonicalize, read_entry
from annal.merkle import leaf_hash
from annal.signing import seal_commitment, signed_statement
from annal.vfspath import InvalidPathError, ReadOnlyPathError, parse_uri

from ._vectors import load


class ExecuteVectors(unittest.TestCase):
    f = load("execute.json")

    def test_commands(self) -> None:
        self.assertEqual(len(self.f["commands"]), 2)
        for v in self.f["commands"]:
            with self.subTest(v["name"]):
                stdin = v["stdin"].encode("utf-8")
                self.assertEqual(oid_of(stdin), v["stdin_oid"])
                canon = canonical_command(v["argv"], v["stdin_oid"])
                self.assertEqual(canon.decode("utf-8"), v["canonical"])
                self.assertEqual(oid_of(canon), v["input_oid"])
                self.assertEqual(command_oid(v["argv"], stdin), v["input_oid"])
        with self.assertRaises(ValueError):
            canonical_command([], oid_of(b""))

    def test_tool_calls(self) -> None:
        self.assertEqual(len(self.f["tool_calls"]), 3)
        for v in self.f["tool_calls"]:
            with self.subTest(v["name"]):
                canon = canonical_tool_call(v["server"], v["tool"], v["arguments"])
                self.assertEqual(canon.decode("utf-8"), v["canonical"])
                self.assertEqual(tool_call_oid(v["server"], v["tool"], v["arguments"]), v["input_oid"])
        # Absent arguments are {} too.
        self.assertEqual(tool_call_oid("everything", "get-tiny-image"), self.f["tool_calls"][2]["input_oid"])

    def test_tool_results(self) -> None:
        self.assertEqual(len(self.f["tool_results"]), 3)
        for v in self.f["tool_results"]:
            with self.subTest(v["name"]):
                self.assertEqual(canonical_tool_result(v["result"]).decode("utf-8"), v["canonical"])
                self.assertEqual(tool_result_oid(v["result"]), v["output_oid"])
        with self.assertRaises(ValueError):
            canonical_tool_result({"content": [], "isError": "yes"})
        with self.assertRaises(ValueError):
            canonical_tool_result([])  # type: ignore[arg-type]

    def test_intents(self) -> None:
        self.assertEqual(len(self.f["intents"]), 2)
        for v in self.f["intents"]:
            with self.subTest(v["name"]):
                self.assertEqual(canonicalize(intent_payload(v["input_oid"], v["about"])).decode("utf-8"), v["payload"])
        for reserved in ("phase", "input_oid", "intent", "output_oid", "artifact_hash", "exit_code", "output_bytes"):
            with self.assertRaises(ValueError):
                intent_payload(self.f["intents"][0]["input_oid"], {reserved: 1})

    def test_results(self) -> None:
        self.assertEqual(len(self.f["results"]), 1)
        for v in self.f["results"]:
            with self.subTest(v["name"]):
                r = Result(output_oid=v["output_oid"], artifact_hash=v["artifact_hash"], exit_code=v["exit_code"],
                           output_bytes=v["output_bytes"], about=v["about"], intent=v["intent"],
                           input_oid=v["input_oid"])
                self.assertEqual(canonicalize(r.payload()).decode("utf-8"), v["payload"])
        with self.assertRaises(ValueError):
            Result(output_oid="", artifact_hash="", exit_code=1 << 31).payload()


class VFSVectors(unittest.TestCase):
    f = load("vfs.json")

    def test_writes(self) -> None:
        self.assertEqual(len(self.f["writes"]), 4)
        for v in self.f["writes"]:
            with self.subTest(v["name"]):
                p = parse_uri(v["uri"])
                p.check_writable()
                self.assertEqual(p.uri, v["uri"])
                self.assertEqual((p.target, p.write_type), (v["target"], v["type"]))
                content = v["content"].encode("utf-8")
                self.assertEqual(oid_of(content), v["oid"])
                req = p.write_request(v["oid"], v["envelope"])
                # What a signed write states: the action, not the bytes.
                stmt = signed_statement("o", "a", "n", "t", "POST", "/v1/actions", req)
                self.assertIn(b'"request":' + v["signed_request"].encode("utf-8") + b",", stmt)
                # The entry the write logs names the same action.
                entry = v["entry"].encode("utf-8")
                self.assertEqual(leaf_hash(entry).hex(), v["leaf_hash"])
                self.assertEqual(read_entry(entry)["action"], req)

    def test_refused(self) -> None:
        self.assertEqual(len(self.f["refused"]), 8)
        for v in self.f["refused"]:
            with self.subTest(v["name"]):
                with self.assertRaises(InvalidPathError) as cm:
                    parse_uri(v["uri"])
                self.assertEqual(str(cm.exception), v["error"])

    def test_read_only_paths(self) -> None:
        for uri in ("vfs://agent-a/policy/active.json", "vfs://agent-a/mem/working/", "vfs://agent-a/",
                    "vfs://agent-a/ipc/outbox/agent-b/hello"):
            with self.subTest(uri), self.assertRaises(ReadOnlyPathError):
                parse_uri(uri).check_writable()
        self.assertTrue(parse_uri("vfs://agent-a/mem/working/").is_dir)
        self.assertTrue(parse_uri("vfs://agent-a/audit/events.jsonl").is_view)


class SealedVectors(unittest.TestCase):
    f = load("sealed.json")

    def test_commitments(self) -> None:
        self.assertEqual(len(self.f["commitments"]), 2)
        for v in self.f["commitments"]:
            with self.subTest(v["name"]):
                salt = bytes.fromhex(v["salt_hex"])
                self.assertEqual(canonicalize(v["payload"]).decode("utf-8"), v["canonical"])
                self.assertEqual(seal_commitment(salt, v["payload"]), v["commitment"])
                self.assertNotEqual(seal_commitment(bytes(32) if any(salt) else b"\1" * 32, v["payload"]),
                                    v["commitment"])
        # A signed sealing request is stated with the commitment the event carries.
        v = self.f["commitments"][0]
        body = {"type": "create", "target": "crm/customers/42.json", "payload": v["payload"], "seal": True,
                "subject": "customer-42", "salt": base64.b64encode(bytes.fromhex(v["salt_hex"])).decode()}
        stmt = json.loads(signed_statement("o", "a", "n", "t", "POST", "/v1/actions", body).split(b"\n", 1)[1])
        self.assertEqual(stmt["request"]["body"], {"type": "create", "target": "crm/customers/42.json",
                                                   "sealed": {"commitment": v["commitment"], "subject": "customer-42"}})
        self.assertEqual(read_entry(self.f["events"][0]["entry"].encode())["action"]["sealed"]["commitment"],
                         v["commitment"])


if __name__ == "__main__":
    unittest.main()
