"""Signing keys shared with the Go tools, through the real binaries (annald
named by ANNAL_ANNALD, the annal CLI by ANNAL_CLI): a key `annal keys
generate` made signs this client's requests, and a key this client made
signs the CLI's, both accepted by annald and carried by the events."""

import json
import os
import subprocess
import unittest

from annal.client import Client
from annal.signing import SigningKey

from ._services import annald, annald_folder, binary, root_credential

GRANTS = [{"pattern": "workspace/**", "actions": ["mutate"]}]


class KeysSharedWithTheCLI(unittest.TestCase):
    dir: str
    url: str
    root: Client
    cli: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.cli = binary("ANNAL_CLI")
        cls.dir, data = annald_folder(cls)
        server, cls.url = annald(data)
        cls.addClassCleanup(server.stop)
        cls.root = Client(cls.url, root_credential(data))

    def signer(self, name: str, key: SigningKey) -> "tuple[str, str]":
        a = self.root.create_agent(name, "signs", energy=1000, trust=0.8, grants=GRANTS,
                                   signing_key=str(key.verifier), require_signed=True)
        self.root.issue_envelope(a["id"], 500, GRANTS)
        return a["id"], a["credential"]

    def signed_by(self, index: int, agent: str, key: SigningKey) -> None:
        s = json.loads(self.root.event(index))["signed"]
        self.assertEqual((s["by"], s["key"]), (agent, f"{key.verifier.key_id:08x}"))

    def test_a_key_annal_keys_generate_made_signs_this_clients_requests(self) -> None:
        path = os.path.join(self.dir, "go.key")
        out = subprocess.run([self.cli, "keys", "generate", path, "--name", "go-made-key"], check=True,
                             capture_output=True, text=True).stdout.strip()
        key = SigningKey.load(path)
        self.assertEqual(str(key.verifier), out)
        agent, cred = self.signer("go-keyed", key)
        r = Client(self.url, cred, signing_key=key).submit("mutate", "workspace/a.md", {"by": "python"})
        self.signed_by(r["index"], agent, key)

    def test_a_key_this_client_made_signs_the_clis_requests(self) -> None:
        path = os.path.join(self.dir, "py.key")
        key = SigningKey.generate_file(path, "py-made-key")
        agent, cred = self.signer("py-keyed", key)
        out = subprocess.run([self.cli, "--server", self.url, "--credential", cred, "--signing-key", path, "submit",
                              "--type", "mutate", "--target", "workspace/b.md", "--payload", '{"by":"go"}'],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.signed_by(json.loads(out.stdout)["index"], agent, key)


if __name__ == "__main__":
    unittest.main()
