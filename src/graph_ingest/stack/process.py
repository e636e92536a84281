"""Daemon processes with a log file and a pid file: start, check, stop (SIGTERM, then SIGKILL);
and, for tests and benchmarks, children that do not outlive the process that starts them.

Linux-first: liveness and identity come from /proc (a zombie counts as dead; a pid file whose pid
now belongs to an unrelated process is stale).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

LOG_ROTATE_BYTES = 64 * 1024 * 1024
POLL_INTERVAL_S = 0.05

# Children started by this process, kept so that they are reaped (no zombies, no ResourceWarning).
_children: dict[int, subprocess.Popen[bytes]] = {}


def read_pid(path: Path) -> int | None:
    """The pid stored in ``path``, or None when the file is missing or does not hold a pid."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    first = text.splitlines()[0].strip() if text else ""
    return int(first) if first.isdigit() and int(first) > 0 else None


def write_pid(path: Path, pid: int) -> None:
    """Write ``pid`` atomically (a reader never sees a half-written file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{pid}\n", encoding="ascii")
    tmp.replace(path)


def remove_pid(path: Path) -> None:
    path.unlink(missing_ok=True)


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        return "?"
    # "pid (comm) S ..." - comm may contain spaces and parentheses; the state follows the last ")".
    return stat.rsplit(")", 1)[-1].split()[0]


def is_running(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (reaps it when it is our own child)."""
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        del _children[pid]
        return False
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    state = _proc_state(pid)
    if state is None and Path("/proc/self").exists():
        return False
    return state not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def is_ours(pid: int, marker: str) -> bool:
    """True if ``pid`` is alive and its command line mentions ``marker`` (a path of this stack).

    Guards against pid reuse: a pid file left by a crash may name a pid the kernel has since given
    to an unrelated process, which must never be signalled.
    """
    if not is_running(pid):
        return False
    if pid in _children or not Path("/proc/self").exists():
        return True  # our own unreaped child cannot have been reused; no /proc: trust the file
    # /proc/<pid>/cmdline reads empty for a moment while a JVM maps its heap; look again.
    deadline = time.monotonic() + 2.0
    while True:
        args = cmdline(pid)
        if args or time.monotonic() >= deadline or not is_running(pid):
            return any(marker in arg for arg in args)
        time.sleep(POLL_INTERVAL_S)


def _rotate(log_path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if log_path.stat().st_size > LOG_ROTATE_BYTES:
            log_path.replace(log_path.with_name(log_path.name + ".1"))


def spawn(
    argv: Sequence[str],
    *,
    log_path: Path,
    pid_path: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Start ``argv`` in its own session with stdout+stderr appended to ``log_path``; record its
    pid in ``pid_path``. Returns the pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    _rotate(log_path)
    with open(log_path, "ab") as log:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        log.write(f"\n=== {stamp} graph-ingest stack: {' '.join(argv)}\n".encode())
        log.flush()
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,  # a Ctrl-C in the terminal of `stack up` does not reach it
            close_fds=True,
        )
    _children[child.pid] = child
    write_pid(pid_path, child.pid)
    logger.debug("started pid %d: %s (log %s)", child.pid, argv[0], log_path)
    return child.pid


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def start_bound(args: Sequence[str], **options: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(args, **options)`` for a child that must not outlive this process: the
    kernel sends it SIGTERM when the thread that started it ends, so a test or benchmark killed
    mid-run leaves no workers behind. Start it from the main thread, which lives as long as the
    process (the signal follows the starting thread, not the process)."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("start_bound from the main thread only: its child dies with the thread")
    prctl = _prctl()
    if prctl is None:
        return subprocess.Popen(args, **options)
    return subprocess.Popen(
        args, preexec_fn=functools.partial(_die_with, prctl, os.getpid()), **options
    )


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, resolved in the parent: a child between fork and exec must not load a
    library (another thread of the parent may have held the loader's lock at the fork)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # only tests and benchmarks start bound children

    return ctypes.CDLL(None, use_errno=True).prctl


def _die_with(prctl: Callable[..., int], parent: int) -> None:
    """In the child, before exec: SIGTERM when ``parent``'s starting thread ends."""
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the signal was asked for
        os.kill(os.getpid(), signal.SIGTERM)


def wait_until(
    condition: Callable[[], bool], *, timeout_s: float, interval_s: float = POLL_INTERVAL_S
) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def terminate(pid: int, *, timeout_s: float, hard: bool = False) -> bool:
    """Stop ``pid``: SIGTERM and wait up to ``timeout_s``, then SIGKILL. ``hard`` sends SIGKILL
    at once (a crash). Returns True if the process had to be killed."""
    if not is_running(pid):
        return False
    if not hard:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if wait_until(lambda: not is_running(pid), timeout_s=timeout_s):
            return False
        logger.warning("pid %d ignored SIGTERM for %.0f s; sending SIGKILL", pid, timeout_s)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not is_running(pid), timeout_s=30.0)
    return True


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True if something listens on (or otherwise holds) ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


_TCP_STATES = {"01": "ESTABLISHED", "06": "TIME_WAIT", "08": "CLOSE_WAIT", "0A": "LISTEN"}


def _sockets_on_port(port: int) -> list[tuple[str, str]]:
    """(state, inode) of every TCP socket whose local port is ``port``, from /proc/net."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.append((_TCP_STATES.get(fields[3], fields[3]), fields[9]))
    return found


def _owners(inodes: set[str]) -> dict[str, int]:
    owners: dict[str, int] = {}
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            for fd in fd_dir.iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    owners[target[8:-1]] = int(fd_dir.parent.name)
        except OSError:
            continue
    return owners


def describe_port_use(port: int) -> str:
    """Who holds ``port``, as well as /proc tells (e.g. "pid 123 (java) listens on it")."""
    sockets = _sockets_on_port(port)
    if not sockets:
        return "holder unknown"
    owners = _owners({inode for _, inode in sockets if inode != "0"})
    parts = []
    for state, inode in sockets:
        pid = owners.get(inode)
        who = f"pid {pid} ({(cmdline(pid) or ['?'])[0].rsplit('/', 1)[-1]})" if pid else "a socket"
        verb = "listens on it" if state == "LISTEN" else f"uses it as a local port ({state})"
        parts.append(f"{who} {verb}")
    return "; ".join(dict.fromkeys(parts))


def port_open(port: int, host: str = "127.0.0.1", timeout_s: float = 0.5) -> bool:
    """True if a TCP connection to ``host:port`` succeeds (cheap gate before a client probe)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of ``path`` (reads at most the last 64 KiB)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            data = fh.read()
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])
