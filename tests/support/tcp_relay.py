"""A TCP relay in front of a browser's CDP port, for tests that cut one connection and keep the rest."""

from __future__ import annotations

import contextlib
import socket
import threading


class Relay:
    """A TCP relay in front of a browser's CDP port whose connections can be cut one by one."""

    def __init__(self, upstream: str):
        host_port = upstream.split("/")[2]
        self.upstream, self.path = host_port, "/" + upstream.split("/", 3)[3]
        self.server = socket.create_server(("127.0.0.1", 0))
        self.connections: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.server.getsockname()[1]}{self.path}"

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.server.accept()
            except OSError:
                return
            host, port = self.upstream.split(":")
            up = socket.create_connection((host, int(port)))
            self.connections.append((down, up))
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for end in (a, b):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self, index: int) -> None:
        for end in self.connections[index]:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
