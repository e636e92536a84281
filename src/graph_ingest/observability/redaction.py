"""Secrets never reach a log line: the configured passwords, and whatever looks like one (a DSN's
``user:password@``, ``password=…``, ``sasl.password: …``), are replaced before a record is written.

:class:`Redactor` is applied by the formatters of ``observability.logs`` to the whole text they
write (message and exception), so a password that a driver puts in an error message is caught
too. :func:`secrets_of` lists the settings' secrets (Neo4j, PostgreSQL, the LLM key, and every
``KAFKA__EXTRA`` value whose name says password, secret or token).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph_ingest.settings import Settings

MASK = "***"

_SECRET_NAME = r"(?:password|passwd|pwd|secret|api[_.-]?key|token)"
_PATTERNS = (
    # scheme://user:password@host
    re.compile(r"(?P<keep>[a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+(?=@)", re.IGNORECASE),
    # password=value, sasl.password: value, "password": "value", 'api_key': 'value'
    re.compile(
        rf"(?P<keep>[\w.-]*{_SECRET_NAME}[\w.-]*['\"]?\s*[=:]\s*['\"]?)[^\s'\",;&)}}]+",
        re.IGNORECASE,
    ),
)


class Redactor:
    """Replaces known secret values and password-shaped fragments of a text with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: tuple[str, ...] = ()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Also mask these values (empty ones are ignored), longest first."""
        with self._lock:
            known = set(self._secrets) | {s for s in secrets if s}
            self._secrets = tuple(sorted(known, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        for pattern in _PATTERNS:
            text = pattern.sub(_keep_name, text)
        return text


def _keep_name(match: re.Match[str]) -> str:
    return match["keep"] + MASK


def secrets_of(settings: Settings) -> list[str]:
    """Every secret value the settings hold."""
    values = [settings.neo4j.password, settings.postgres.password, settings.llm.api_key]
    found = [value.get_secret_value() for value in values if value is not None]
    for name, value in settings.kafka.extra.items():
        if re.search(_SECRET_NAME, name, re.IGNORECASE) and value:
            found.append(str(value))
    return found


__all__ = ["MASK", "Redactor", "secrets_of"]
