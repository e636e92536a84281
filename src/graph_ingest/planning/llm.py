"""The ``llm`` extractor: candidates from an OpenAI-compatible chat-completions endpoint.

**Configuration** (``LlmSettings``, env prefix ``GRAPH_INGEST_LLM__``): ``BASE_URL`` (required;
requests go to ``<base_url>/chat/completions``; one carrying credentials is refused), ``MODEL`` (required), ``API_KEY`` (optional;
sent only as ``Authorization: Bearer``, a SecretStr never logged, shown or put in an error),
``CONNECT_TIMEOUT_S``, ``TIMEOUT_S``, ``MAX_ATTEMPTS``, ``INITIAL_BACKOFF_S``, ``MAX_BACKOFF_S``,
``MAX_PROMPT_CHARS``, ``CHUNKS_PER_REQUEST``, ``MAX_OUTPUT_TOKENS``, ``MAX_RESPONSE_BYTES``.

**What is sent.** Chunks are grouped, up to ``CHUNKS_PER_REQUEST`` per request and within
``MAX_PROMPT_CHARS`` characters of messages; a chunk larger than one request allows is cut into
pieces, at whitespace where possible (a quote spanning a cut is not found). The request asks,
through ``response_format`` and the system message, for JSON matching a schema derived from the
graph schema (node types with their properties and enums, relation types with their allowed
source and target types); each candidate names its segment and quotes it verbatim.

**What comes back.** Offsets are ours: each quote is located (exact match, first occurrence) in
the segment it names, so ``document[start:end] == quote``. A quote not found is a
QUOTE_NOT_IN_CHUNK issue, and a candidate with none found is dropped. Output that is not JSON,
does not match the schema, is larger than ``MAX_RESPONSE_BYTES`` or holds no text is a
MALFORMED_OUTPUT issue on each chunk of that request; the other requests go on. Issues and logs
give the output's size and the JSON error position or schema path, never the output itself.

**Failures** (ExtractionFailed, nothing returned for the document): 429 → RESOURCE_EXHAUSTED;
5xx, connection errors, a 2xx that is not a chat completion → UNAVAILABLE; timeouts →
DEADLINE_EXCEEDED — each retried with backoff honouring Retry-After (seconds or HTTP date, capped
by ``MAX_BACKOFF_S``) for ``MAX_ATTEMPTS`` tries in all, then raised with that code and
``retry_after_s``. 400 and other 4xx → INVALID_ARGUMENT, 401 → UNAUTHENTICATED, 403 →
PERMISSION_DENIED, 404 → NOT_FOUND, at once. A prompt bound too small for the graph schema's
fixed part → FAILED_PRECONDITION.

**Identity** (part of the extraction fingerprint): ``{"extractor": "llm", "model": ...,
"prompt_version": ...}``. The prompt version is the code's (:data:`llm_prompt.PROMPT_VERSION`),
bumped with any change to what is sent, not a setting: a setting could change the fingerprint
without changing the prompt. The endpoint is not part of it: the same model behind another host
(a replica, a proxy) must not re-extract every document.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from graph_ingest.domain.candidates import Chunk, Extraction
from graph_ingest.domain.errors import ConfigurationError
from graph_ingest.planning.chat_client import ChatClient, UnusableReply
from graph_ingest.planning.graph_schema import GraphSchema
from graph_ingest.planning.llm_output import MALFORMED_OUTPUT, group_issues, read_answer
from graph_ingest.planning.llm_prompt import PROMPT_VERSION, Prompt
from graph_ingest.settings.llm import LlmSettings

log = logging.getLogger(__name__)


class LlmExtractor:
    name = "llm"

    def __init__(
        self,
        settings: LlmSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Checks the settings; touches no network (the HTTP client is made on first use)."""
        if settings.model is None:
            raise ConfigurationError("GRAPH_INGEST_LLM__MODEL is not set (the llm extractor)")
        self._model = settings.model
        self._settings = settings
        self._client = ChatClient(settings, sleep=sleep, clock=clock)

    def identity(self) -> dict[str, Any]:
        return {"extractor": self.name, "model": self._model, "prompt_version": PROMPT_VERSION}

    def extract(self, chunks: Sequence[Chunk], schema: GraphSchema) -> Extraction:
        settings = self._settings
        prompt = Prompt.for_schema(schema)
        requests = prompt.plan_requests(
            chunks,
            max_prompt_chars=settings.max_prompt_chars,
            max_segments=settings.chunks_per_request,
        )
        parts: list[Extraction] = []
        for segments in requests:
            body = prompt.body(
                model=self._model,
                segments=segments,
                max_tokens=settings.max_output_tokens,
            )
            try:
                reply = self._client.complete(body)
            except UnusableReply as unusable:
                parts.append(
                    Extraction(
                        issues=tuple(group_issues(segments, MALFORMED_OUTPUT, str(unusable)))
                    )
                )
                continue
            parts.append(
                read_answer(reply.content, segments, truncated=reply.finish_reason == "length")
            )
        extraction = Extraction(
            entities=tuple(e for p in parts for e in p.entities),
            relations=tuple(r for p in parts for r in p.relations),
            issues=tuple(i for p in parts for i in p.issues),
        )
        log.info(
            "llm %s: %d chunks in %d requests: %d entities, %d relations, %d issues",
            self._client.endpoint,
            len(chunks),
            len(requests),
            len(extraction.entities),
            len(extraction.relations),
            len(extraction.issues),
        )
        return extraction

    def start(self) -> None:
        """Nothing to open: the HTTP client is made on the first request."""

    def close(self) -> None:
        self._client.close()
