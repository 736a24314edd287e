"""Loads the repository's known-answer vectors (testvectors/, FORMATS.md)."""

import json
import os
from typing import Any, Dict

from annal.note import VerifierKey

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "testvectors")


def load(name: str) -> Dict[str, Any]:
    with open(os.path.join(VECTORS, name), encoding="utf-8") as f:
        out: Dict[str, Any] = json.load(f)
        return out


def keys(f: Dict[str, Any]) -> Dict[str, VerifierKey]:
    return {k["label"]: VerifierKey.parse(k["verifier_key"]) for k in f["keys"]}
