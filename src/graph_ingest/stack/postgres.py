"""A private PostgreSQL cluster: initdb into the run directory, pg_ctl start/stop.

initdb and postgres refuse to run as root; as root (sessions, CI) the data directory is owned by
the ``postgres`` system user and the binaries run through ``runuser -u postgres --``. When that
user cannot reach the run directory (a private parent folder, e.g. one made by ``mktemp -d``),
the cluster and its log live in a folder of the temporary directory named after the run
directory instead, so that ``stack up`` works wherever the project was cloned.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import logging
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from graph_ingest.stack.errors import MissingToolError, StackError, StartupError
from graph_ingest.stack.process import is_ours, read_pid, tail
from graph_ingest.stack.service import Service

logger = logging.getLogger(__name__)

MAX_CONNECTIONS = 200
SOCKET_PATH_MAX = 100  # sun_path is 108 bytes; leave room


def find_bindir() -> Path:
    """The folder holding initdb and pg_ctl."""
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        result = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False, timeout=30
        )
        candidate = Path(result.stdout.strip())
        if result.returncode == 0 and (candidate / "initdb").is_file():
            return candidate
    found = sorted(
        (Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin") if Path(p, "initdb").is_file()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    raise MissingToolError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found via pg_config or "
        "/usr/lib/postgresql/*/bin: install them (e.g. apt-get install postgresql)"
    )


def run_as_prefix() -> list[str]:
    """``runuser -u postgres --`` when we are root, nothing otherwise."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise MissingToolError(
            "running as root but there is no 'postgres' user to run PostgreSQL as "
            "(e.g. apt-get install postgresql creates it)"
        ) from exc
    runuser = shutil.which("runuser")
    if runuser is None:
        raise MissingToolError("running as root but runuser is not on PATH (util-linux)")
    return [runuser, "-u", "postgres", "--"]


def socket_dir_for(home: Path, port: int) -> Path:
    """``home`` itself, unless the socket path would be too long for a Unix socket."""
    if len(str(home / f".s.PGSQL.{port}")) <= SOCKET_PATH_MAX:
        return home
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"graph-ingest-pg-{digest}"


def postgres_can_reach(path: Path) -> bool:
    """Whether the ``postgres`` user may traverse every existing folder on the way to ``path``
    (plain mode bits; what does not exist yet will be created and chowned by us)."""
    user = pwd.getpwnam("postgres")
    groups = {user.pw_gid} | set(os.getgrouplist(user.pw_name, user.pw_gid))
    for folder in [*reversed(path.parents), path]:
        try:
            info = folder.stat()
        except FileNotFoundError:
            return True
        if info.st_uid == user.pw_uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid in groups:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return False
    return True


def reachable_home(home: Path) -> Path:
    """``home``, or a stable stand-in under the temporary directory when running as root and the
    ``postgres`` user cannot reach ``home``."""
    if os.geteuid() != 0 or postgres_can_reach(home):
        return home
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"graph-ingest-postgres-{digest}"


def server_options(*, port: int, socket_dir: Path) -> str:
    """The ``pg_ctl -o`` string (fsync stays on: crash tests rely on durability)."""
    return " ".join(
        [
            f"-p {port}",
            f"-k {shlex.quote(str(socket_dir))}",
            "-c listen_addresses=127.0.0.1",
            f"-c max_connections={MAX_CONNECTIONS}",
        ]
    )


class PostgresService(Service):
    name = "postgres"
    port_fields = ("postgres_port",)

    @functools.cached_property
    def home(self) -> Path:
        return reachable_home(self.layout.service_dir(self.name))

    @property
    def log_path(self) -> Path:
        # pg_ctl opens its log as the postgres user: keep it where that user can write.
        default = self.layout.log_file(self.name)
        return default if self.home == self.layout.service_dir(self.name) else self.home / "pg.log"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def socket_dir(self) -> Path:
        return socket_dir_for(self.home, self.port)

    def pid(self) -> int | None:
        pid = read_pid(self.data_dir / "postmaster.pid")
        return pid if pid is not None and is_ours(pid, str(self.data_dir)) else None

    def clean_stale(self) -> None:
        """PostgreSQL detects a stale postmaster.pid itself; nothing to do."""

    def _chown(self, *paths: Path) -> None:
        if os.geteuid() != 0:
            return
        user = pwd.getpwnam("postgres")
        for path in paths:
            os.chown(path, user.pw_uid, user.pw_gid)

    def _check_access(self) -> None:
        prefix = run_as_prefix()
        if not prefix:
            return
        check = subprocess.run([*prefix, "test", "-w", str(self.home)], check=False, timeout=30)
        if check.returncode != 0:
            raise StackError(
                f"the postgres user cannot write {self.home} (is a parent folder private?); "
                "choose GRAPH_INGEST_STACK__RUN_DIR under a folder it can reach, e.g. /tmp, or "
                "chmod o+x the parent folders"
            )

    def _run(self, argv: list[str], what: str, timeout_s: float) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(argv)}\n".encode())
            log.flush()
            try:
                result = subprocess.run(
                    [*run_as_prefix(), *argv],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.home,
                    timeout=timeout_s,
                    check=False,
                    start_new_session=True,
                )
            except subprocess.TimeoutExpired as exc:
                raise StartupError(
                    f"postgres: {what} timed out; see {self.log_path}", details=tail(self.log_path)
                ) from exc
        if result.returncode != 0:
            raise StartupError(
                f"postgres: {what} failed (exit {result.returncode}); see {self.log_path}",
                details=tail(self.log_path),
            )

    def launch(self) -> None:
        bindir = find_bindir()
        run_as_prefix()  # fail early with a clear message
        if self.home != self.layout.service_dir(self.name):
            self.report(
                f"postgres: the postgres user cannot reach {self.layout.root}; "
                f"keeping the cluster in {self.home}"
            )
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.touch()
        socket_dir = self.socket_dir
        socket_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._chown(self.home, self.log_path, socket_dir)
        self._check_access()
        if not (self.data_dir / "PG_VERSION").exists():
            self.report(f"postgres: initdb {self.data_dir}")
            self._run(
                [
                    str(bindir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                    "-E",
                    "UTF8",
                    "--no-locale",
                ],
                "initdb",
                timeout_s=120.0,
            )
        self._run(
            [
                str(bindir / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_path),
                "-o",
                server_options(port=self.port, socket_dir=socket_dir),
                "-w",
                "-t",
                str(max(1, int(self.settings.startup_timeout_s))),
                "start",
            ],
            "pg_ctl start",
            timeout_s=self.settings.startup_timeout_s + 10,
        )

    def halt(self, pid: int, *, hard: bool) -> None:
        mode = "immediate" if hard else "fast"
        timeout = max(1, int(self.settings.stop_timeout_s))
        try:
            self._run(
                [
                    str(find_bindir() / "pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-m",
                    mode,
                    "-w",
                    "-t",
                    str(timeout),
                    "stop",
                ],
                f"pg_ctl stop -m {mode}",
                timeout_s=timeout + 10,
            )
        except StackError:
            if self.pid() is not None:
                raise

    def probe(self, timeout_s: float = 5.0) -> bool:
        import psycopg

        try:
            with psycopg.connect(
                host="127.0.0.1",
                port=self.port,
                user="postgres",
                dbname="postgres",
                connect_timeout=max(1, round(timeout_s)),
                application_name="graph-ingest-stack",
            ) as conn:
                row = conn.execute("SELECT 1").fetchone()
        except psycopg.Error as exc:
            logger.debug("postgres not ready: %s", exc)
            return False
        return row == (1,)
