# The graph-ingest application image: every worker, the API and the one-off commands.
#
#   docker build -t graph-ingest:local .
#   docker run --rm graph-ingest:local worker applier --help
#
# No setting and no secret is baked in: everything comes from GRAPH_INGEST_* variables at run
# time (compose/docker-compose.yml passes them; compose/.env.example documents them).

# Build stage: a wheel of the package, so the runtime image holds no source tree or build tools.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Every dependency ships manylinux wheels for CPython 3.11 (confluent-kafka with librdkafka,
# psycopg[binary] with libpq, the Neo4j driver's Rust extension, orjson): no compiler needed.
COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels \
    && useradd --system --uid 10001 --user-group --create-home --home-dir /home/graph-ingest \
       --shell /usr/sbin/nologin graph-ingest
WORKDIR /home/graph-ingest
USER 10001:10001
# Exec form: graph-ingest is PID 1 and gets SIGTERM itself (it finishes the batch in hand,
# commits and leaves its group). Its default worker id, <hostname>-<pid>, is then the
# container's hostname and 1: unique per replica and stable across restarts of a container.
ENTRYPOINT ["graph-ingest"]
CMD ["--help"]
