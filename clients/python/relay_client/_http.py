"""Keep-alive HTTP/1.1 connections to one server: one per thread.

A worker makes thousands of calls a second; a new TCP connection per call
(what ``urllib`` does) costs a handshake, a socket and a thread's worth of
setup each time. Each thread keeps its own ``http.client`` connection
instead, so no lock is taken per call and no connection is shared.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.parse
from typing import Dict, Optional, Tuple, Type

# How a keep-alive connection the server closed while it sat idle fails:
# before any byte of an answer came back. A request that is safe to repeat
# is sent again on a fresh connection (the server may also have dropped the
# connection after taking the request in: it may have been applied).
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)

# A connection idle for longer is not reused (a fresh one is opened): the
# server may be about to close it, and a request that is not safe to repeat
# could not be sent again.
IDLE_MAX = 5.0

TransportError = (OSError, http.client.HTTPException)
"""What :meth:`Connections.request` raises when no answer came back."""


class Connections(threading.local):
    """One keep-alive connection per thread to the server at ``url``."""

    conn: Optional[http.client.HTTPConnection] = None  # this thread's, once made
    idle_since = 0.0  # when its last answer was read (time.monotonic())

    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {url!r}")
        self._cls: Type[http.client.HTTPConnection] = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")

    def request(
        self,
        method: str,
        path: str,
        body: Optional[bytes],
        headers: Dict[str, str],
        timeout: float,
        *,
        repeatable: bool = False,
    ) -> Tuple[int, bytes]:
        """Sends one request; returns the answer's status and body.

        A ``repeatable`` request (one the server may apply twice without
        harm) that fails on a reused connection before any byte of the
        answer came back is sent once more on a new connection (the server
        had closed the idle one). Any other failure raises (an ``OSError``
        or ``http.client.HTTPException``) and drops the connection.
        """
        for attempt in (1, 2):
            conn = self._connection(timeout)
            reused = conn.sock is not None
            try:
                if not reused:
                    self._connect(conn)
                conn.request(method, self._prefix + path, body=body, headers=headers)
                resp = conn.getresponse()
            except _STALE:
                self.close()
                if reused and repeatable and attempt == 1:
                    continue
                raise
            except BaseException:
                self.close()
                raise
            try:
                answer = resp.status, resp.read()
                self.idle_since = time.monotonic()
                return answer
            except BaseException:
                self.close()
                raise
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def close(self) -> None:
        """Closes this thread's connection (the next request opens another)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn = self.conn
        if conn is not None and conn.sock is not None and time.monotonic() - self.idle_since > IDLE_MAX:
            self.close()  # idle too long: the server may be closing it
            conn = None
        if conn is None:
            conn = self.conn = self._cls(self._host, self._port, timeout=timeout)
        elif conn.timeout != timeout:
            # A long-poll needs a longer read timeout than the other calls.
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
        return conn

    @staticmethod
    def _connect(conn: http.client.HTTPConnection) -> None:
        conn.connect()
        # A small request must not wait for a delayed ACK (not every Python sets it).
        try:
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
