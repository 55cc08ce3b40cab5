"""A loopback TCP proxy in front of an HTTP endpoint (moto's S3 server) that can refuse
connections, or reset, close or stall chosen requests: the connection failures of a real
object store, on 127.0.0.1 only.

Each request gets its own connection (the proxy answers every response with
``Connection: close``), so a rule applies to exactly the requests it matches:

- ``refuse``: nothing listens on the port (connections are refused) while it is set;
- ``reset``: the request is read, never forwarded, and the connection reset (RST);
- ``close``: the request is forwarded (the store carries it out), then the connection is
  closed before the answer: a lost acknowledgement;
- ``stall``: the request is read and never answered (the client's read timeout fires).
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Callable

FAULTS = ("reset", "close", "stall")


@dataclass
class Rule:
    fault: str  # one of FAULTS
    match: Callable[[str, str], bool]  # (method, path with query) -> whether the rule applies
    times: int = 1_000_000  # how many matching requests it applies to


@dataclass
class Proxy:
    upstream: tuple[str, int]
    rules: list[Rule] = field(default_factory=list)
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, what happened)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._placeholder: socket.socket | None = _bound(0)  # holds the port from the start
        self.port = self._placeholder.getsockname()[1]
        self.serve()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------ control

    def serve(self) -> None:
        """Listen again (after :meth:`refuse`)."""
        with self._lock:
            if self._listener is not None:
                return
            listener = _bound(self.port)
            listener.listen(64)
            listener.settimeout(0.05)
            self._listener = listener
            placeholder, self._placeholder = self._placeholder, None
        if placeholder is not None:
            placeholder.close()
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def refuse(self) -> None:
        """Stop listening: every new connection is refused until :meth:`serve`. The port stays
        held by a socket that does not listen, so no other socket takes it meanwhile."""
        with self._lock:
            listener, self._listener = self._listener, None
            if listener is not None and self._placeholder is None:
                self._placeholder = _bound(self.port)
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # stops listening now, even while _accept polls it
            except OSError:
                pass
            listener.close()

    def fail(self, fault: str, match: Callable[[str, str], bool] = lambda method, path: True,
             times: int = 1_000_000) -> None:
        assert fault in FAULTS, fault
        with self._lock:
            self.rules.append(Rule(fault, match, times))

    def heal(self) -> None:
        """No more faults: every request is forwarded and answered."""
        with self._lock:
            self.rules.clear()
        self.serve()

    def close(self) -> None:
        self._stop.set()
        self.refuse()
        with self._lock:
            placeholder, self._placeholder = self._placeholder, None
        if placeholder is not None:
            placeholder.close()

    # ------------------------------------------------------------ serving

    def _accept(self, listener: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except socket.timeout:
                continue
            except OSError:  # closed by refuse()
                return
            client.settimeout(None)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _rule(self, method: str, path: str) -> str | None:
        with self._lock:
            for rule in self.rules:
                if rule.times > 0 and rule.match(method, path):
                    rule.times -= 1
                    return rule.fault
        return None

    def _serve(self, client: socket.socket) -> None:
        try:
            request = _read_request(client)
            if request is None:
                return
            method, path, head, body = request
            fault = self._rule(method, path)
            self.seen.append((method, path, fault or "forwarded"))
            if fault == "reset":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            if fault == "stall":
                self._stop.wait(30)
                return
            upstream = socket.create_connection(self.upstream, timeout=30)
            try:
                upstream.sendall(_with_connection_close(head) + body)
                reply = _read_all(upstream)
            finally:
                upstream.close()
            if fault == "close":
                return  # carried out, the answer lost
            head_end = reply.find(b"\r\n\r\n")
            client.sendall(_with_connection_close(reply[:head_end + 4]) + reply[head_end + 4:])
        except OSError:
            pass
        finally:
            client.close()


def _bound(port: int) -> socket.socket:
    """A TCP socket bound to ``port`` on loopback, sharing it with the proxy's other sockets."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def _read_request(sock: socket.socket) -> tuple[str, str, bytes, bytes] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    end = data.index(b"\r\n\r\n") + 4
    head, rest = data[:end], data[end:]
    lines = head.decode("latin-1").split("\r\n")
    method, path = lines[0].split(" ")[:2]
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    if headers.get("expect", "").lower() == "100-continue":
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")  # the body follows; the store never sees the Expect
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while not (rest.endswith(b"0\r\n\r\n") and _chunks_complete(rest)):
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    else:
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    return method, path, head, rest


def _chunks_complete(body: bytes) -> bool:
    position = 0
    while True:
        line_end = body.find(b"\r\n", position)
        if line_end < 0:
            return False
        size = int(body[position:line_end].split(b";")[0], 16)
        if size == 0:
            return body.find(b"\r\n\r\n", line_end) >= 0
        position = line_end + 2 + size + 2
        if position > len(body):
            return False


def _with_connection_close(head: bytes) -> bytes:
    lines = head.decode("latin-1").split("\r\n")
    kept = [line for line in lines[1:]
            if line and not line.lower().startswith(("connection:", "keep-alive:", "expect:"))]
    return "\r\n".join([lines[0], *kept, "Connection: close", "", ""]).encode("latin-1")


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
