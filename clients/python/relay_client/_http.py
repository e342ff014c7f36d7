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

# How writing a request fails when the server stopped reading it: it
# answered (e.g. 413 for a body over its limit, after reading the first
# part) and closed the connection with the rest unread, so the kernel reset
# it. The answer is usually already in this end's receive buffer: it is read
# before the write's failure is taken for a lost connection.
_WRITE_REFUSED = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)

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

        When sending fails with a broken pipe or a reset, the answer is read
        all the same: a server that refuses a request before reading all of
        it (a body over its limit: 413) answers and closes, which breaks the
        rest of the write. That answer is returned (and the request is not
        sent again: it was refused, not lost); only when none can be read
        does the write's own error count, under the rules above.
        """
        for attempt in (1, 2):
            conn = self._connection(timeout)
            reused = conn.sock is not None
            write_error: Optional[OSError] = None
            try:
                if not reused:
                    self._connect(conn)
                try:
                    conn.request(method, self._prefix + path, body=body, headers=headers)
                except _WRITE_REFUSED as e:
                    # http.client marks the request sent before writing it,
                    # so getresponse() may still be called: it reads what the
                    # server answered before closing, which stays in the
                    # receive buffer even after a reset (Linux hands out the
                    # data received before the RST first). No answer there:
                    # it raises RemoteDisconnected or ConnectionResetError,
                    # and the write's error is the one reported (a resend is
                    # then decided as for any failure before an answer).
                    write_error = e
                try:
                    resp = conn.getresponse()
                except (http.client.RemoteDisconnected, OSError):
                    if write_error is not None:
                        raise write_error from None  # no answer came
                    raise
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
                if write_error is not None or resp.status == 413:
                    # Part of the request was never sent, or the server
                    # refused the body without reading all of it (413): it
                    # closes the connection (without saying so), which
                    # cannot carry another request.
                    self.close()
                else:
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
