"""Plan fingerprint: "v1:" + SHA-256 of the RFC 8785 canonical JSON of a plan's business content.

Versioned and language-neutral: any implementation that canonicalises the same content the same
way gets the same fingerprint. Set-like collections are sorted first so their order is irrelevant.
"""

import hashlib
from typing import Any

import rfc8785

FINGERPRINT_VERSION = "v1"


def canonical_json(content: Any) -> bytes:
    return bytes(rfc8785.dumps(content))


def fingerprint_of(content: Any) -> str:
    return f"{FINGERPRINT_VERSION}:{hashlib.sha256(canonical_json(content)).hexdigest()}"
