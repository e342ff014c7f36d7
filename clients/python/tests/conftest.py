"""A real `relay serve` for the tests: started on a free loopback port with a
token, on a database in a temporary directory, stopped (SIGTERM) after."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RELAY = os.environ.get("RELAY_BIN", str(REPO / "target" / "debug" / "relay"))
TOKEN = "py-test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, db: Path, port: int):
        self.db = db
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.token = TOKEN
        env = dict(os.environ, RELAY_TOKEN=TOKEN)
        self.proc = subprocess.Popen(
            [RELAY, "--db", str(db), "serve", "--listen", f"127.0.0.1:{port}", "--max-wait", "5s"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=1).read()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"relay serve exited: {self.proc.stderr.read().decode()}")
                if time.monotonic() > deadline:
                    raise RuntimeError("relay serve did not answer within 30 s")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def server(tmp_path):
    if not os.path.exists(RELAY):
        pytest.fail(f"no relay binary at {RELAY}: run `cargo build --bin relay` (or set RELAY_BIN)")
    s = Server(tmp_path / "relay.db", free_port())
    yield s
    s.stop()


@pytest.fixture
def client(server):
    from relay_client import Client

    return Client(server.url, token=server.token)
