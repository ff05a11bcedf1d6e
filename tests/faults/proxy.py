"""A TCP proxy a test controls: point a process at it, then cut the service off and bring it back.

The machine's PostgreSQL, Redis and S3 servers are shared: a fault test never stops them,
it stops forwarding to them. `cut()` closes every open connection and refuses new ones
(connection refused, as a dead host's port answers); `restore()` forwards again.
"""

import socket
import threading
from contextlib import contextmanager, suppress


class TcpProxy:
    """Forwards 127.0.0.1:<port> to a target host and port, in daemon threads."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._lock = threading.Lock()
        self._connections: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.port = self._bind()
        self.restore()

    def _bind(self) -> int:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]

    def restore(self) -> None:
        """Accept and forward connections again."""
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(64)
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Close every forwarded connection and stop listening (new connections are refused)."""
        with self._lock:
            listener, self._listener = self._listener, None
            connections, self._connections = self._connections, []
        if listener is not None:
            _close(listener)
        for connection in connections:
            _close(connection)

    close = cut

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._listener is not listener:
                    _close(client)
                    _close(upstream)
                    return
                self._connections += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def url_for(self, url: str) -> str:
        """`url` with its host:port replaced by this proxy's."""
        host, port = self.target
        return url.replace(f"{host}:{port}", f"127.0.0.1:{self.port}", 1)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextmanager
def proxy_to(host: str, port: int):
    """A running proxy to host:port, cut when the block ends."""
    proxy = TcpProxy(host, port)
    try:
        yield proxy
    finally:
        proxy.cut()
