"""The live stream against a real annald: events in log order, and resumed
after the last one taken — by the same generator across an annald that
was killed and started again on the same data, and by a new stream after
a given index — with no event missed or repeated."""

import os
import unittest
from typing import List

from annal.client import Client
from annal.errors import APIError

from ._services import annald, annald_folder, root_credential


class StreamAgainstAnnald(unittest.TestCase):
    dir: str
    data: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.dir, cls.data = annald_folder(cls)

    def test_stream_resumes_without_gaps_or_duplicates(self) -> None:
        server, url = annald(self.data)
        try:
            root = Client(url, root_credential(self.data))
            grants = [{"pattern": "workspace/**", "actions": ["mutate"]}]
            a = root.create_agent("streamer", "writes notes", energy=10_000, trust=0.8, grants=grants)
            root.issue_envelope(a["id"], 5_000, grants)
            agent = Client(url, a["credential"])
            start = root.info()["size"] - 1
            first = [agent.submit("mutate", f"workspace/s{i}.md", {"i": i})["index"] for i in range(3)]
            live = agent.stream(after=start, actor=a["id"], reconnect_wait=0.2)
            got: List[int] = [next(live)["index"] for _ in range(3)]
            self.assertEqual(got, first)

            # annald dies under the open stream and starts again where it was.
            server.proc.kill()
            server.proc.wait(10)
            server.stop()
            server, _ = annald(self.data, url=url)
            second = [agent.submit("mutate", f"workspace/t{i}.md", {"i": i})["index"] for i in range(3)]
            items = [next(live) for _ in range(3)]
            self.assertEqual([it["index"] for it in items], second)
            self.assertEqual(items[0]["event"]["action"]["target"], "workspace/t0.md")
            live.close()

            # A new stream after the last index taken starts right after it.
            third = agent.submit("mutate", "workspace/u.md", {"i": 9})["index"]
            again = agent.stream(after=first[-1], actor=a["id"])
            self.assertEqual([next(again)["index"] for _ in range(4)], second + [third])
            again.close()

            # A stream the kernel refuses raises its error before it starts.
            with self.assertRaises(APIError) as cm:
                next(agent.stream(actor="root"))
            self.assertEqual(cm.exception.status, 403)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
