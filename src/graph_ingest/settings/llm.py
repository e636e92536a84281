"""The ``llm`` extractor's settings (``GRAPH_INGEST_LLM__*``): the OpenAI-compatible endpoint and
model, the chat client's timeouts and retries, and the bounds of prompts and responses."""

from __future__ import annotations

from pydantic import Field, SecretStr

from graph_ingest.settings.section import Section


class LlmSettings(Section):
    """The ``llm`` extractor: an OpenAI-compatible chat-completions endpoint.

    Example: GRAPH_INGEST_LLM__BASE_URL=http://127.0.0.1:8000/v1, GRAPH_INGEST_LLM__MODEL=my-model,
    GRAPH_INGEST_LLM__API_KEY=... (sent only in the Authorization header, never logged)."""

    base_url: str | None = Field(
        default=None,
        description="the API root; requests go to <base_url>/chat/completions (required by llm)",
    )
    model: str | None = Field(
        default=None, description="the model id sent with every request (required by llm)"
    )
    api_key: SecretStr | None = Field(
        default=None, description="sent as 'Authorization: Bearer <key>'; none for a local server"
    )
    connect_timeout_s: float = Field(default=5.0, gt=0)
    timeout_s: float = Field(
        default=120.0, gt=0, description="read/write timeout of one request (the model thinking)"
    )
    max_attempts: int = Field(
        default=4,
        ge=1,
        description="tries of one request on 429, 5xx, timeouts and connection errors before the"
        " extraction fails with the transient code (the planner worker then backs off)",
    )
    initial_backoff_s: float = Field(default=1.0, gt=0)
    max_backoff_s: float = Field(
        default=30.0, gt=0, description="caps the backoff and any Retry-After the endpoint sends"
    )
    max_prompt_chars: int = Field(
        default=64_000,
        ge=1_000,
        description="characters of the messages of one request (the instructions and the JSON"
        " schema derived from the graph schema included); a larger chunk is sent in pieces",
    )
    chunks_per_request: int = Field(
        default=8, ge=1, description="chunks sent together in one request, within max_prompt_chars"
    )
    max_output_tokens: int = Field(
        default=4_096, ge=1, description="the request's max_tokens: bounds what the model writes"
    )
    max_response_bytes: int = Field(
        default=1024 * 1024,
        ge=1_024,
        description="a larger response body is not read: recorded as malformed output",
    )
