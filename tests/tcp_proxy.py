"""A TCP forwarder between a worker and a real service, to cut the network in a test: the
service stays up for every other test, while this worker's connections are refused and dropped
(an outage as the worker sees it) until the proxy listens again on the same port."""

from __future__ import annotations

import contextlib
import socket
import threading


def free_port() -> int:
    """A port nothing listens on (now): the OS picks it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TcpProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0  # chosen at the first start, kept by every restart
        self._lock = threading.Lock()
        self._listening = threading.Event()
        self._accepting: threading.Thread | None = None
        self._connections: list[socket.socket] = []

    def start(self) -> None:
        """Listen (again) on 127.0.0.1:``port``."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.2)  # how soon a cut listener notices
        self.port = listener.getsockname()[1]
        self._listening.set()
        self._accepting = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._accepting.start()

    def cut(self) -> None:
        """Refuse new connections (the listener is closed when this returns) and drop every
        open one."""
        self._listening.clear()
        if self._accepting is not None:
            self._accepting.join(timeout=10)
            self._accepting = None
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            _close(connection)

    def _accept(self, listener: socket.socket) -> None:
        with listener:
            while self._listening.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                try:
                    server = socket.create_connection(self.upstream, timeout=10)
                except OSError:
                    _close(client)
                    continue
                for connection in (client, server):
                    connection.settimeout(None)
                with self._lock:
                    self._connections += [client, server]
                for source, target in ((client, server), (server, client)):
                    threading.Thread(target=_pump, args=(source, target), daemon=True).start()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        _close(source)
        _close(target)


def _close(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
    connection.close()
