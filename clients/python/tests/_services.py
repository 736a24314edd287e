"""Starts the real annald and annal-witness binaries that .ci/test builds
(ANNAL_ANNALD, ANNAL_WITNESS) on 127.0.0.1 for the tests that need them."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request
from typing import IO, List, Optional, Tuple, Type

REQUIRED = os.environ.get("ANNAL_REQUIRE_SERVICES") == "1"


def binary(env: str) -> str:
    """The binary named by env; skips the test when unset, fails instead
    under ANNAL_REQUIRE_SERVICES=1."""
    path = os.environ.get(env, "")
    if not path:
        if REQUIRED:
            raise AssertionError(f"ANNAL_REQUIRE_SERVICES=1 but {env} names no binary")
        raise unittest.SkipTest(f"{env} is not set")
    return path


def annald_folder(cls: Type[unittest.TestCase]) -> Tuple[str, str]:
    """For a class of tests against annald (skipped without one): a
    temporary folder, removed after the class, and the data folder in it."""
    binary("ANNAL_ANNALD")
    d = tempfile.mkdtemp()
    cls.addClassCleanup(shutil.rmtree, d, ignore_errors=True)
    return d, os.path.join(d, "data")


def root_credential(data: str) -> str:
    """The credential annald wrote for root on its first start on data."""
    with open(os.path.join(data, "root.credential"), encoding="utf-8") as f:
        return f.read().strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """One server process, its output in a log file beside its data."""

    def __init__(self, argv: List[str], log_path: str, ready_url: Optional[str] = None) -> None:
        self.log: IO[bytes] = open(log_path, "ab")
        self.log_path = log_path
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while ready_url is not None:
            try:
                urllib.request.urlopen(ready_url, timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    with open(log_path, encoding="utf-8", errors="replace") as f:
                        raise AssertionError(f"{argv[0]} did not start:\n{f.read()}")
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.log.close()


def annald(data: str, *flags: str, url: str = "") -> "tuple[Server, str]":
    """Starts annald on data (created on first start), at url if given (to
    start it again where it was); returns it and its URL."""
    url = url or f"http://127.0.0.1:{free_port()}/"
    argv = [binary("ANNAL_ANNALD"), "serve", "--data", data, "--listen", url[len("http://"):-1],
            "--checkpoint-interval", "100ms", *flags]
    return Server(argv, data + ".log", url + "v1/healthz"), url
