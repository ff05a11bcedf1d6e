"""A TCP proxy that forwards slowly: a store at the end of a thin line, for tests that need uploads to take seconds.

tests/faults/proxy.py cuts a service off; this one keeps it answering, at `rate` bytes per
second in each direction of each connection.
"""

import contextlib
import socket
import threading
import time


class SlowProxy:
    """Forwards 127.0.0.1:<port> to host:port at `rate` bytes per second per direction, in daemon threads."""

    def __init__(self, host: str, port: int, rate: int) -> None:
        self.target, self.rate = (host, port), rate
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url_for(self, url: str) -> str:
        host, port = self.target
        return url.replace(f"{host}:{port}", f"127.0.0.1:{self.port}", 1)

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                return
            upstream.settimeout(None)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        # A tenth of a second's worth at a time, then a tenth of a second's pause.
        piece = max(1, self.rate // 10)
        try:
            while data := source.recv(piece):
                sink.sendall(data)
                time.sleep(len(data) / self.rate)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
