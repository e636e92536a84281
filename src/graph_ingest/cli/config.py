"""The commands' settings: read from the environment once per command, a bad value one clear
line (``reports_errors`` makes it exit 2, a usage error) instead of a pydantic traceback."""

from __future__ import annotations

from pydantic import ValidationError

from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.domain.status import StatusCode
from graph_ingest.settings import Settings


class InvalidSetting(ConfigurationError):
    code = StatusCode.INVALID_ARGUMENT


def load_settings() -> Settings:
    """``Settings()``; InvalidSetting names the first invalid variable and why."""
    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(settings)"
        raise InvalidSetting(f"invalid setting {where}: {first['msg']}") from None


__all__ = ["InvalidSetting", "load_settings"]
