"""Plan fingerprint: "v1:" + SHA-256 of the RFC 8785 canonical JSON of a plan's business content.

Versioned and language-neutral: any implementation that canonicalises the same content the same
way gets the same fingerprint. Set-like collections are sorted first so their order is irrelevant.

Every consumed plan is fingerprinted again, so canonicalisation is on the applier's hot path. The
reference implementation (the ``rfc8785`` package) is pure Python; :func:`canonical_json` writes
the same bytes with orjson's encoder where the two agree by construction, and hands everything
else to the reference:

* strings: orjson escapes exactly what RFC 8785 (ECMAScript ``JSON.stringify``) escapes;
* object keys: orjson sorts by code point, RFC 8785 by UTF-16 code unit; the two orders differ
  only between characters above U+FFFF and those in U+E000-U+FFFF, so a key above U+FFFF goes to
  the reference;
* numbers: integers are written alike within +-(2**53 - 1) (outside it the reference refuses
  them); a float is written by :func:`es6_number` (ECMAScript ``Number::toString``) and spliced
  in as a raw fragment;
* any other type, a non-finite float, or anything orjson refuses: the reference decides (so it
  raises exactly what it raises).

``tests/unit/test_fingerprint.py`` checks the two byte for byte on floats, non-ASCII and non-BMP
text and keys, and integers at and past the bounds.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import orjson
import rfc8785

FINGERPRINT_VERSION = "v1"

_MAX_SAFE_INTEGER = 2**53 - 1


class NeedsReference(Exception):
    """The fast writer cannot vouch for this content: the reference writes it."""


def canonical_json(content: Any) -> bytes:
    try:
        return orjson.dumps(json_ready(content), option=orjson.OPT_SORT_KEYS)
    except (NeedsReference, orjson.JSONEncodeError):
        return reference_canonical_json(content)


def reference_canonical_json(content: Any) -> bytes:
    return bytes(rfc8785.dumps(content))


def fingerprint_of(content: Any) -> str:
    return _fingerprint(canonical_json(content))


def fingerprint_of_typed(content: Any) -> str:
    """The fingerprint of content whose float-capable leaves went through :func:`json_ready`
    already and whose every other leaf is a str, bool, None or int, under ASCII keys (content
    assembled from a validated model): orjson writes the rest as RFC 8785 does, so nothing else
    is walked. Raises NeedsReference for an integer outside ±(2**53 - 1); the caller then
    fingerprints the plain content with :func:`fingerprint_of`."""
    try:
        data = orjson.dumps(content, option=orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError as exc:
        raise NeedsReference from exc
    return _fingerprint(data)


def _fingerprint(canonical: bytes) -> str:
    return f"{FINGERPRINT_VERSION}:{hashlib.sha256(canonical).hexdigest()}"


def json_ready(value: Any) -> Any:
    """``value`` as orjson may write it (floats as ES6 fragments); raises NeedsReference where
    only the reference can write it."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
            return value
        raise NeedsReference
    if kind is float:
        if not math.isfinite(value):
            raise NeedsReference
        return orjson.Fragment(es6_number(value))
    if kind is dict:
        prepared = {}
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                raise NeedsReference
            prepared[key] = json_ready(item)
        return prepared
    if kind is list or kind is tuple:
        return [json_ready(item) for item in value]
    raise NeedsReference


def es6_number(value: float) -> str:
    """A finite float as ECMAScript's ``Number::toString`` writes it (RFC 8785 §3.2.2.3): the
    shortest round-tripping digits (Python's ``repr`` finds the same), placed as ES6 places them."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # value = 0.digits * 10**point, as ES6 counts it (its n)
    point = len(whole) + int(exponent or 0) if whole != "0" else int(exponent or 0)
    if whole == "0":
        point -= len(fraction) - len(fraction.lstrip("0"))
    digits = digits.rstrip("0") or "0"
    count = len(digits)
    if count <= point <= 21:
        text = digits + "0" * (point - count)
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        power = point - 1
        head = digits[0] + (f".{digits[1:]}" if count > 1 else "")
        text = f"{head}e{'+' if power > 0 else '-'}{abs(power)}"
    return sign + text
