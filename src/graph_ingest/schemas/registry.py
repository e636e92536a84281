"""The in-process catalogue of Avro schemas, each known by its CRC-64-AVRO fingerprint.

Every bundled ``<subject>.v<N>.avsc`` file in this package is parsed once, at import, into a
:class:`SchemaVersion`. The highest version of a subject is its *current* schema: writers use it and
readers resolve every older version to it. Older versions stay in the package (never edited, never
deleted) so that messages written by them can still be read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from fastavro import parse_schema
from fastavro.schema import fingerprint, to_parsing_canonical_form

from graph_ingest.domain.errors import ConfigurationError

_PACKAGE = "graph_ingest.schemas"

PLAN = "plan"
OPERATION = "operation"
DLQ_ENVELOPE = "dlq_envelope"
DEGRADATION_EVENT = "degradation_event"
BREAKER_CONTROL = "breaker_control"
INGEST_REQUEST = "ingest_request"

_SCHEMA_FILE = re.compile(r"(?P<subject>[a-z][a-z0-9_]*)\.v(?P<version>[1-9][0-9]*)\.avsc")


@dataclass(frozen=True, slots=True, eq=False)
class SchemaVersion:
    """One version of one subject's schema, parsed and fingerprinted."""

    subject: str
    version: int
    name: str
    fingerprint: bytes
    parsed: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{self.subject}.v{self.version} ({self.fingerprint.hex()})"


def schema_version(subject: str, version: int, schema: dict[str, Any]) -> SchemaVersion:
    """Parse ``schema`` and fingerprint its Parsing Canonical Form (8 bytes, little-endian)."""
    parsed = parse_schema(schema)
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise ConfigurationError(f"{subject}.v{version}: the top-level schema must be a record")
    canonical = to_parsing_canonical_form(schema)
    return SchemaVersion(
        subject=subject,
        version=version,
        name=str(parsed["name"]),
        fingerprint=bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO")),
        parsed=parsed,
    )


class SchemaCatalogue:
    """Schemas by fingerprint (to find a message's writer) and by subject (to find the reader)."""

    def __init__(self, versions: Iterable[SchemaVersion] = ()) -> None:
        self._by_fingerprint: dict[bytes, SchemaVersion] = {}
        self._by_version: dict[tuple[str, int], SchemaVersion] = {}
        self._current: dict[str, SchemaVersion] = {}
        for version in versions:
            self.add(version)

    def add(self, version: SchemaVersion) -> None:
        known = self._by_fingerprint.get(version.fingerprint)
        if known is not None:
            if known.subject != version.subject:
                raise ConfigurationError(
                    f"schema {version.label} has the fingerprint of {known.label}"
                )
            return  # same wire form (only docs or defaults differ): the first one reads it
        same_number = self._by_version.get((version.subject, version.version))
        if same_number is not None:
            raise ConfigurationError(f"{version.label} and {same_number.label} differ")
        self._by_fingerprint[version.fingerprint] = version
        self._by_version[(version.subject, version.version)] = version
        current = self._current.get(version.subject)
        if current is None or version.version > current.version:
            self._current[version.subject] = version

    def lookup(self, fingerprint: bytes) -> SchemaVersion | None:
        return self._by_fingerprint.get(fingerprint)

    def current(self, subject: str) -> SchemaVersion:
        try:
            return self._current[subject]
        except KeyError:
            raise ConfigurationError(f"no schema for subject {subject!r}") from None

    def version(self, subject: str, number: int) -> SchemaVersion:
        try:
            return self._by_version[(subject, number)]
        except KeyError:
            raise ConfigurationError(f"no schema {subject}.v{number}") from None

    def versions(self) -> tuple[SchemaVersion, ...]:
        return tuple(self._by_fingerprint.values())


def load_bundled() -> SchemaCatalogue:
    """Parse every ``<subject>.v<N>.avsc`` shipped in this package."""
    catalogue = SchemaCatalogue()
    for entry in sorted(resources.files(_PACKAGE).iterdir(), key=lambda e: e.name):
        match = _SCHEMA_FILE.fullmatch(entry.name)
        if match is None:
            continue
        schema = json.loads(entry.read_text(encoding="utf-8"))
        catalogue.add(schema_version(match["subject"], int(match["version"]), schema))
    return catalogue


BUNDLED = load_bundled()
