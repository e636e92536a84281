"""The commands' settings: read from the environment once per command, a bad value one clear
line (``reports_errors`` makes it exit 2, a usage error) instead of a pydantic traceback."""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.domain.status import StatusCode
from graph_ingest.observability.logs import redactor
from graph_ingest.observability.redaction import secrets_of
from graph_ingest.settings import Settings
from graph_ingest.settings.logs import LogSettings


class InvalidSetting(ConfigurationError):
    code = StatusCode.INVALID_ARGUMENT


def load_settings() -> Settings:
    """``Settings()``; InvalidSetting names the first invalid variable and why. Its secrets are
    masked in every log line from now on."""
    try:
        settings = Settings()
    except ValidationError as exc:
        raise _invalid(exc) from None
    redactor.add(secrets_of(settings))
    return settings


class _LogEnvironment(BaseSettings):
    """The ``log`` section alone: logging is set up before a command reads the rest."""

    model_config = SettingsConfigDict(
        env_prefix="GRAPH_INGEST_", env_nested_delimiter="__", frozen=True, extra="ignore"
    )
    log: LogSettings = LogSettings()


def load_log_settings() -> LogSettings:
    """``GRAPH_INGEST_LOG__*`` only (a bad value elsewhere is the command's to report)."""
    try:
        return _LogEnvironment().log
    except ValidationError as exc:
        raise _invalid(exc) from None


def _invalid(exc: ValidationError) -> InvalidSetting:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(settings)"
    return InvalidSetting(f"invalid setting {where}: {first['msg']}")


__all__ = ["InvalidSetting", "load_log_settings", "load_settings"]
