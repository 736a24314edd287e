"""The package as pip installs it, and the README's example as pasted."""

import contextlib
import importlib
import io
import os
import re
import subprocess
import sys
import tempfile
import unittest
import zipfile

from ._services import REQUIRED
from ._vectors import load

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Package(unittest.TestCase):
    def test_wheel_holds_every_module_and_the_typed_marker(self) -> None:
        sys.path.insert(0, os.path.join(HERE, "_build"))
        try:
            annal_build = importlib.import_module("annal_build")  # the in-tree backend, off the import path
        finally:
            sys.path.pop(0)
        self.assertEqual(annal_build.get_requires_for_build_wheel(), [])
        with tempfile.TemporaryDirectory() as d:
            name = annal_build.build_wheel(d)
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = set(z.namelist())
                record = z.read("annal-0.1.0.dist-info/RECORD").decode()
        modules = {f"annal/{n}" for n in os.listdir(os.path.join(HERE, "annal")) if n.endswith(".py")}
        self.assertIn("annal/py.typed", names)
        self.assertIn("annal/__init__.py", modules)
        self.assertTrue(modules <= names, modules - names)
        for n in names - {"annal-0.1.0.dist-info/RECORD"}:
            self.assertIn(n + ",sha256=", record)

    def test_pip_installs_the_package_with_no_index(self) -> None:
        """pip install ./clients/python in a new virtual environment (with
        the system's packages, for cryptography), with no package index:
        the installed package, not this folder, is the one imported."""
        with tempfile.TemporaryDirectory() as d:
            venv = os.path.join(d, "venv")
            made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], capture_output=True)
            if made.returncode != 0:  # Debian's python3 without python3-venv
                why = "python3 -m venv is not available: " + made.stderr.decode(errors="replace")[-200:]
                if REQUIRED:
                    self.fail(why)
                self.skipTest(why)
            py = os.path.join(venv, "bin", "python")
            pip = subprocess.run([py, "-m", "pip", "install", "--no-index", HERE], capture_output=True, cwd=d)
            self.assertEqual(pip.returncode, 0, pip.stdout.decode() + pip.stderr.decode())
            code = ("import annal, annal.client, annal.execute, annal.vfspath, os; "
                    "print(os.path.dirname(annal.__file__)); print(annal.Client.__name__, annal.__version__)")
            out = subprocess.run([py, "-c", code], capture_output=True, cwd=d, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            where, what = out.stdout.splitlines()
            self.assertTrue(where.startswith(venv), where)
            self.assertEqual(what, "Client 0.1.0")
            typed = os.path.join(where, "py.typed")
            self.assertTrue(os.path.exists(typed))

    def test_readme_example_runs_as_pasted(self) -> None:
        with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
            code = re.findall(r"```python\n(.*?)```", f.read(), re.S)[0]
        v = load("tlogproofs.json")
        inc = v["inclusion"][1]
        log_pub = next(k["verifier_key"] for k in v["keys"] if k["label"] == "log")
        cwd = os.getcwd()
        with tempfile.TemporaryDirectory() as d:
            os.chdir(d)
            try:
                os.mkdir("annal-data")
                for path, text in (("notes.event", v["entries"][inc["index"]]), ("notes.tlog-proof", inc["proof"]),
                                   ("annal-data/log.pub", log_pub + "\n")):
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(text)
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    exec(compile(code, "README.md", "exec"), {})
            finally:
                os.chdir(cwd)
        self.assertEqual(out.getvalue(), f"entry {inc['index']} of 7 is in the log\n")


if __name__ == "__main__":
    unittest.main()
