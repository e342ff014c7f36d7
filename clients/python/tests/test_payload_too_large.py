"""A request body over the server's limit is answered PayloadTooLarge, not
Unavailable: the server answers 413 after reading the first ~2 MiB and
closes the connection without reading the rest, so the client's write fails
(a broken pipe or a reset) with the answer already in its receive buffer."""

from __future__ import annotations

import collections
import socket
import threading
from typing import Any, Dict, List

import pytest

from relay_client import Client, PayloadTooLarge, RelayError

MiB = 1 << 20
TRIES = 10


def _outcome(call: Any) -> str:
    """What a call raised (its class and message), or "returned"."""
    try:
        call()
    except RelayError as e:
        return f"{type(e).__name__}: {e}"
    return "returned"


# 3 MiB: the whole body fits in the sockets' buffers, so its write succeeds,
# and the next call must not go on the connection the server closes after
# its 413. 10 and 40 MiB: the write fails (EPIPE, ECONNRESET) mid-body.
@pytest.mark.parametrize("size_mib", [3, 10, 40])
def test_an_oversized_submit_is_payload_too_large_every_time(client: Client, size_mib: int):
    payload = "x" * (size_mib * MiB)
    big: List[str] = []
    small: List[str] = []
    for i in range(TRIES):
        if i % 2:
            client.close()  # every other try on a new connection, the others on a reused one
        # With a unique key the submit is one the client may resend: it must not be.
        kwargs: Dict[str, Any] = {"unique_key": f"u{i}"} if i % 3 == 0 else {}
        big.append(_outcome(lambda: client.submit("big", "k", payload, **kwargs)))
        # The next call (one that is not resent) works: it does not go on the refused connection.
        small.append(_outcome(lambda: client.submit("small", "k", {"i": i})))
    failed = [o for o in big if not o.startswith("PayloadTooLarge:")]
    assert not failed, f"{len(failed)}/{TRIES} tries at {size_mib} MiB were not PayloadTooLarge: {dict(collections.Counter(failed))}"
    failed = [o for o in small if o != "returned"]
    assert not failed, f"{len(failed)}/{TRIES} submits after a {size_mib} MiB one failed: {dict(collections.Counter(failed))}"
    # Nothing of the refused submits was written.
    stats = client.stats()
    assert "big" not in stats and stats["small"]["READY"] == TRIES


def test_the_413_keeps_its_message_and_status(client: Client):
    with pytest.raises(PayloadTooLarge) as e:
        client.submit("big", "k", "x" * (10 * MiB))
    assert e.value.status == 413 and e.value.code == "payload_too_large"
    assert "limit" in e.value.message


class _Refuser:
    """A raw server that answers a GET with 200 and a POST with 413 after
    reading 64 KiB of its body, then closes without reading the rest (the
    kernel resets the connection: unread bytes were left)."""

    BODY_413 = b'{"error":{"code":"payload_too_large","message":"the body is over the limit"}}'
    ANSWER_413 = b"HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(BODY_413),
        BODY_413,
    )
    ANSWER_200 = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 13\r\n\r\n{"queues":{}}'

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.posts = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            try:
                while True:
                    while b"\r\n\r\n" not in buf:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        buf += chunk
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    if head.startswith(b"GET "):
                        conn.sendall(self.ANSWER_200)
                        continue
                    self.posts += 1
                    while len(buf) < 65536:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        buf += chunk
                    conn.sendall(self.ANSWER_413)
                    return  # closes with the rest of the body unread
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()


def test_a_refused_body_is_not_sent_again():
    # The answer is 413 on a reused connection, and the submit has a unique
    # key (one the client may resend after a connection lost before any
    # answer): it was refused, not lost, so it is sent once.
    refuser = _Refuser()
    try:
        client = Client(f"http://127.0.0.1:{refuser.port}", token="t", timeout=10)
        for i in range(5):
            client.stats()
            with pytest.raises(PayloadTooLarge):
                client.submit("q", "k", "x" * (8 * MiB), unique_key=f"u{i}")
            assert refuser.posts == i + 1, "sent once"
        assert client.stats() == {}
    finally:
        refuser.close()
