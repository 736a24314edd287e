"""RFC 8785 canonical JSON (JCS) and the strict entry reader of FORMATS.md
("What Annal accepts in JSON"): an entry is accepted only if it is exactly
the canonical encoding of what it means."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any, Dict, List, Tuple

from .errors import VerificationError

MAX_ENTRY_BYTES = 65535
MAX_ENTRY_DEPTH = 34
MAX_NUMBER_CHARS = 128


def format_number(x: "float | int") -> str:
    """A number as ECMAScript's Number.prototype.toString writes its double."""
    if isinstance(x, bool):
        raise TypeError("bool is not a number")
    f = float(x)
    if math.isnan(f) or math.isinf(f):
        raise ValueError("NaN and infinities have no JSON form")
    if f == 0:
        return "0"
    if f.is_integer() and abs(f) < 1e21:
        return str(int(f))
    sign = "-" if f < 0 else ""
    r = repr(abs(f))  # shortest round-trip digits
    mant, _, exp = r.partition("e")
    intpart, _, frac = mant.partition(".")
    digits = (intpart + frac).lstrip("0")
    # decimal point position n: value = 0.digits * 10^n
    n = len(intpart.lstrip("0")) if intpart.strip("0") else -(len(frac) - len(frac.lstrip("0")))
    n += int(exp) if exp else 0
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    es = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return sign + digits + "e" + es
    return sign + digits[0] + "." + digits[1:] + "e" + es


def _utf16_key(s: str) -> List[int]:
    b = s.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2)]


def _string(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def canonicalize(value: Any) -> bytes:
    """The RFC 8785 encoding of a JSON value (dict, list, str, int, float, bool, None)."""
    return _encode(value).encode("utf-8")


def _encode(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return format_number(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, dict):
        items = sorted(v.items(), key=lambda kv: _utf16_key(kv[0]))
        return "{" + ",".join(_string(k) + ":" + _encode(x) for k, x in items) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_encode(x) for x in v) + "]"
    raise TypeError(f"{type(v).__name__} is not a JSON value")


class _Num(float):
    """A float that remembers the literal it was read from."""

    literal: str


def _parse_float(lit: str) -> float:
    if len(lit) > MAX_NUMBER_CHARS:
        raise VerificationError(f"JSON number literal longer than {MAX_NUMBER_CHARS} characters")
    d = Decimal(lit)
    if d != 0 and abs(d.adjusted()) > 400:
        raise VerificationError(f"JSON number {lit} has an exponent outside ±400")
    f = float(lit)
    if math.isinf(f) or Decimal(format_number(f)) != d:
        raise VerificationError(f"JSON number {lit} would be written {format_number(f)} in canonical JSON")
    return f


def _pairs(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise VerificationError(f'JSON object has the member "{k}" twice')
        out[k] = v
    return out


def _check(v: Any, depth: int) -> None:
    if isinstance(v, (dict, list)):
        if depth + 1 > MAX_ENTRY_DEPTH:
            raise VerificationError(f"JSON nests deeper than {MAX_ENTRY_DEPTH} levels")
        for x in (list(v.keys()) + list(v.values())) if isinstance(v, dict) else v:
            _check(x, depth + 1)
    elif isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise VerificationError("JSON string has a lone UTF-16 surrogate") from None


def read_strict(data: bytes, max_depth: int = MAX_ENTRY_DEPTH) -> Any:
    """Parses JSON as Annal accepts it (valid UTF-8, no duplicate members, no
    lone surrogates, numbers canonical JSON keeps, bounded depth)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationError("JSON is not valid UTF-8") from None
    try:
        v = json.loads(text, object_pairs_hook=_pairs, parse_float=_parse_float, parse_int=_parse_float,
                       parse_constant=_reject_constant)
    except RecursionError:
        raise VerificationError(f"JSON nests deeper than {max_depth} levels") from None
    except json.JSONDecodeError as e:
        raise VerificationError(f"JSON is malformed: {e}") from None
    _check(v, 0)
    return v


def _reject_constant(name: str) -> Any:
    raise VerificationError(f"JSON has {name}, which is not a number")


def read_entry(entry: bytes) -> Dict[str, Any]:
    """Reads a log entry's bytes as JSON, refusing any entry that is not a
    JSON object in exactly its RFC 8785 form. It does not check the event's
    schema (kinds, parts, identifiers): Annal's Go reader does."""
    if len(entry) > MAX_ENTRY_BYTES:
        raise VerificationError(f"entry is {len(entry)} bytes, more than {MAX_ENTRY_BYTES}")
    v = read_strict(entry)
    if not isinstance(v, dict):
        raise VerificationError("entry is not a JSON object")
    if canonicalize(v) != entry:
        raise VerificationError("entry is not in canonical form (RFC 8785)")
    return v
