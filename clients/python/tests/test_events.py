"""events.json: each event's entry is its RFC 8785 encoding and its leaf
hash SHA-256(0x00 || entry); the entries that fail at the JSON level (not
canonical, malformed, duplicate members, lone surrogates, numbers canonical
JSON would change, too deep) are refused by read_entry."""

import hashlib
import unittest
from typing import Any, Dict

from annal.errors import VerificationError
from annal.jcs import canonicalize, read_entry
from annal.merkle import leaf_hash

from ._vectors import load

# The Go reader's errors for refusals at the JSON level, the ones read_entry
# makes; the others are the event schema's (kinds, parts, identifiers),
# which this package does not check.
JSON_LEVEL = ("entry is not in canonical form", "entry: JSON")


def json_level(r: Dict[str, Any]) -> bool:
    # An empty trace id is canonical JSON: Go refuses it because its event
    # schema leaves empty members out.
    return str(r["go_error"]).startswith(JSON_LEVEL) and r["name"] != "empty trace id"


class EventVectors(unittest.TestCase):
    f = load("events.json")

    def test_entries_and_leaf_hashes(self) -> None:
        self.assertEqual(len(self.f["vectors"]), 55)
        for v in self.f["vectors"]:
            with self.subTest(v["name"]):
                entry = v["entry"].encode("utf-8")
                self.assertEqual(leaf_hash(entry).hex(), v["leaf_hash"])
                self.assertEqual(hashlib.sha256(b"\x00" + entry).hexdigest(), v["leaf_hash"])
                self.assertEqual(canonicalize(v["event"]).decode("utf-8"), v["entry"])
                self.assertEqual(read_entry(entry), v["event"])

    def test_json_level_rejects_are_refused(self) -> None:
        rejects = [r for r in self.f["rejects"] if json_level(r)]
        self.assertEqual(len(rejects), 20)
        for r in rejects:
            with self.subTest(r["name"]):
                with self.assertRaises(VerificationError):
                    read_entry(bytes.fromhex(r["entry_hex"]))


class CanonicalJSON(unittest.TestCase):
    def test_utf16_member_order(self) -> None:
        self.assertEqual(canonicalize({"\uff61": 1, "\U0001F600": 2}).decode(), '{"\U0001F600":2,"\uff61":1}')

    def test_numbers_as_ecmascript(self) -> None:
        cases = {1e21: "1e+21", 9.5367431640625e-7: "9.5367431640625e-7", 100.0: "100", -0.0: "0",
                 1e20: "100000000000000000000", 0.000001: "0.000001", 1e-7: "1e-7", 3.14159: "3.14159"}
        for x, want in cases.items():
            self.assertEqual(canonicalize(x).decode(), want)

    def test_escapes(self) -> None:
        self.assertEqual(canonicalize("\n\x01/\x7f\u2028\"\\").decode(), '"\\n\\u0001/\x7f\u2028\\"\\\\"')


if __name__ == "__main__":
    unittest.main()
