"""Review fixes: a handler thread that cannot die, NaN results, outcomes at
the grace's end, outcomes the server refuses for good, which requests the
transport sends twice, a refused token, a long-poll longer than the
server's --max-wait."""

from __future__ import annotations

import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable, List, Optional

import pytest

import relay_client._http
from relay_client import (
    Client,
    Forbidden,
    LeasedJob,
    LeaseRequest,
    NewJob,
    Outcome,
    OutcomeAnswer,
    Retry,
    Snooze,
    Timeout,
    Unauthorized,
    Unavailable,
    WorkAnswer,
    Worker,
)
from relay_client.errors import error_for
from relay_client.worker import _Loop
from test_worker import background, wait_for


# -- 1. a handler thread never dies ------------------------------------------


def test_retry_and_snooze_delays_are_checked():
    for bad in (math.nan, math.inf, -1):
        with pytest.raises(ValueError):
            Retry("again", bad)
        with pytest.raises(ValueError):
            Snooze(bad)
    for bad in ("5", None, True):
        with pytest.raises(TypeError):
            Retry("again", bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            Snooze(bad)  # type: ignore[arg-type]
    assert Retry("again", 0).delay == 0 and Snooze(1.5).delay == 1.5


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def test_a_handler_thread_survives_every_bad_outcome(client: Client):
    bad = {kind: client.submit("r", kind, max_attempts=1) for kind in ("nan", "mutated", "deep", "unprintable")}
    ok = client.submit("r", "ok")
    worker = Worker(client, ["r"], concurrency=1, handle_signals=False, poll_wait=0.5)

    @worker.handler("nan")
    def nan(job):
        raise Retry("later", math.nan)

    @worker.handler("mutated")
    def mutated(job):
        s = Snooze(1)
        s.delay = "soon"  # type: ignore[assignment]  # past the constructor's check
        raise s

    @worker.handler("deep")
    def deep(job):
        v: Any = []
        for _ in range(100_000):
            v = [v]
        return v  # json.dumps raises RecursionError

    @worker.handler("unprintable")
    def unprintable(job):
        raise Unprintable()

    @worker.handler("ok")
    def fine(job):
        return "fine"

    t = background(worker)
    try:
        wait_for("the one handler thread to run every job", lambda: worker.stats.succeeded + worker.stats.failed == 5, timeout=15)
    finally:
        worker.stop()
        t.join(10)
    assert worker.stats.failed == 4
    for kind, id in bad.items():
        assert client.get(id).state == "DEAD", kind
    assert "RecursionError" in client.get(bad["deep"]).last_error
    assert "Unprintable" in client.get(bad["unprintable"]).last_error
    assert client.get(ok).result == "fine"


# -- 2. NaN and Infinity are not JSON ---------------------------------------


def test_a_nan_result_fails_its_job_only(client: Client):
    with pytest.raises(ValueError):
        Outcome.ack(1, 1, {"x": math.nan})
    with pytest.raises(ValueError):
        client.submit("n", "k", {"x": math.inf})  # not a 400 from the server
    ids = [client.submit("n", "k", {"n": i}, max_attempts=1) for i in range(3)]
    worker = Worker(client, ["n"], concurrency=3, handle_signals=False, poll_wait=0.5)
    gate = threading.Barrier(3)

    @worker.handler("k")
    def handle(job):
        gate.wait(10)  # the three outcomes finish together: one batch
        return {"x": math.nan} if job.payload["n"] == 1 else {"x": job.payload["n"]}

    t = background(worker)
    try:
        wait_for("the batch", lambda: worker.stats.succeeded == 2 and worker.stats.failed == 1, timeout=15)
    finally:
        worker.stop()
        t.join(10)
    assert [client.get(id).state for id in ids] == ["SUCCEEDED", "DEAD", "SUCCEEDED"]
    assert "cannot be sent" in client.get(ids[1]).last_error


# -- 3. an outcome that came right at the grace's end -----------------------


class Fake(Client):
    """Answers every work call's outcomes applied, recording them."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9")
        self.sent: List[List[Outcome]] = []

    def work(self, outcomes: Iterable[Outcome] = (), lease: Optional[LeaseRequest] = None) -> WorkAnswer:
        outcomes = list(outcomes)
        self.sent.append(outcomes)
        return WorkAnswer([OutcomeAnswer(o.id, state="DONE") for o in outcomes], [])


def test_an_outcome_in_the_inbox_at_stop_is_reported_not_released():
    client = Fake()
    worker = Worker(client, ["q"], handle_signals=False)
    loop = _Loop(worker)
    job = LeasedJob(1, 7, "q", "k", 0, 1, 3, "", 30_000, None, None)
    loop.held[job.id] = job
    loop.busy = 1
    loop.deadline = time.monotonic()
    # The handler ended just after the loop's last look at its inbox.
    worker._inbox.put(("done", job, Outcome.ack(1, 7, "finished"), "succeeded"))
    loop.finish()
    assert client.sent == [[Outcome.ack(1, 7, "finished")]]
    assert worker.stats.succeeded == 1 and worker.stats.released == 0


# -- 4. an outcome refused for good becomes a nack ---------------------------


def test_an_outcome_the_server_refuses_becomes_a_nack(client: Client, capfd):
    over_item = client.submit("big", "k", {"size": 1_100_000}, max_attempts=1)  # over the result limit (1 MiB)
    over_body = client.submit("big", "k", {"size": 2_200_000}, max_attempts=1)  # over the body limit (2 MiB): 413
    worker = Worker(client, ["big"], concurrency=2, handle_signals=False, poll_wait=0.5)

    @worker.handler("k")
    def handle(job):
        return "x" * job.payload["size"]

    t = background(worker)
    try:
        wait_for("both jobs nacked", lambda: worker.stats.failed == 2, timeout=15)
    finally:
        worker.stop()
        t.join(10)
    for id in (over_item, over_body):
        job = client.get(id)
        assert job.state == "DEAD" and job.attempts == 1, (id, job)
        assert "the server refused this job's outcome (ack)" in job.last_error
        assert len(job.last_error.encode()) <= 8 * 1024
    assert "exceeds the limit" in client.get(over_item).last_error
    assert "payload_too_large" in client.get(over_body).last_error
    assert "its lease will expire" not in capfd.readouterr().err


# -- 5. what the transport sends twice ---------------------------------------


class Flaky(BaseHTTPRequestHandler):
    """Answers each connection's first request; takes the second one in and
    drops the connection without an answer (as a server may, mid-request)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.serve()

    def do_POST(self) -> None:
        self.serve()

    def serve(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append((self.command, self.path, self.client_address[1]))  # type: ignore[attr-defined]
        self.server.keys.append(self.headers.get("Idempotency-Key"))  # type: ignore[attr-defined]
        self.count = getattr(self, "count", 0) + 1
        if self.count == 2:
            self.close_connection = True
            return
        body = {"/v1/jobs": b'{"id": 1}', "/v1/jobs/batch": b'{"ids": [1, 2]}'}.get(self.path, b'{"queues": {}}')
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def flaky():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    server.seen = []  # type: ignore[attr-defined]
    server.keys = []  # type: ignore[attr-defined]  # each request's Idempotency-Key header
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def submits(server: Any) -> List[Any]:
    return [s for s in server.seen if s[:2] == ("POST", "/v1/jobs")]


def test_a_submit_is_not_sent_twice_after_a_dropped_connection(flaky):
    client = Client(f"http://127.0.0.1:{flaky.server_port}", token="t")
    client.stats()  # the connection is made and kept
    with pytest.raises(Unavailable):
        client.submit("q", "k", {"n": 1})  # the server may have taken it in: not sent again
    assert len(submits(flaky)) == 1


def test_a_submit_with_a_unique_key_is_sent_again(flaky):
    client = Client(f"http://127.0.0.1:{flaky.server_port}", token="t")
    client.stats()
    assert client.submit("q", "k", unique_key="once") == 1
    assert len(submits(flaky)) == 2


def test_a_submit_with_an_idempotency_key_is_sent_again(flaky):
    client = Client(f"http://127.0.0.1:{flaky.server_port}", token="t")
    client.stats()
    assert client.submit("q", "k", {"n": 1}, idempotency_key="order-1") == 1
    first, second = submits(flaky)
    assert first[2] != second[2], "sent again, on a fresh connection"
    # Without a key (nor a unique key) it is still not sent again.
    client.stats()
    with pytest.raises(Unavailable):
        client.submit("q", "k", {"n": 2})
    assert len(submits(flaky)) == 3


def test_a_batch_is_sent_again_only_when_keyed(flaky):
    client = Client(f"http://127.0.0.1:{flaky.server_port}", token="t")
    batches = lambda: [s for s in flaky.seen if s[:2] == ("POST", "/v1/jobs/batch")]  # noqa: E731
    client.stats()
    with pytest.raises(Unavailable):
        client.submit_batch([NewJob("q", "k"), NewJob("q", "k")])
    assert len(batches()) == 1, "no key: not sent again"
    client.stats()
    assert client.submit_batch([NewJob("q", "k"), NewJob("q", "k")], idempotency_key="b-1") == [1, 2]
    assert len(batches()) == 3, "the header's key: sent again"
    assert flaky.keys[-2:] == ["b-1", "b-1"], "with its Idempotency-Key header both times"
    client.stats()
    own = [NewJob("q", "k", idempotency_key="j-1"), NewJob("q", "k", idempotency_key="j-2")]
    assert client.submit_batch(own) == [1, 2]
    assert len(batches()) == 5, "every job with a key of its own: sent again"
    client.stats()
    with pytest.raises(Unavailable):
        client.submit_batch([NewJob("q", "k", idempotency_key="j-3"), NewJob("q", "k")])
    assert len(batches()) == 6, "one job without a key: not sent again"


def test_a_connection_idle_too_long_is_not_reused(flaky, monkeypatch):
    monkeypatch.setattr(relay_client._http, "IDLE_MAX", 0.2, raising=False)
    client = Client(f"http://127.0.0.1:{flaky.server_port}", token="t")
    client.stats()
    time.sleep(0.4)
    assert client.submit("q", "k") == 1
    first, second = flaky.seen
    assert len(submits(flaky)) == 1 and first[2] != second[2], "a fresh connection"


# -- 6. a refused token stops the worker -------------------------------------


def test_new_error_codes():
    assert isinstance(error_for(403, "forbidden", "no"), Forbidden)
    assert isinstance(error_for(None, "timeout", "slow"), Timeout)


def test_a_refused_token_stops_the_worker(server, client: Client, capfd):
    client.submit("q", "k")
    worker = Worker(Client(server.url, token="not-the-token"), ["q"], handle_signals=False, poll_wait=0.5)
    worker.handler("k")(lambda job: None)
    raised: List[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as e:  # noqa: BLE001
            raised.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "stopped instead of retrying forever"
    worker.stop()
    assert len(raised) == 1 and isinstance(raised[0], Unauthorized)
    assert "refuses this worker's token" in capfd.readouterr().err


# -- 7. a long-poll longer than the server allows ----------------------------


def test_a_poll_wait_over_the_servers_max_wait_is_lowered(client: Client, capfd):
    id = client.submit("w", "k")  # conftest's server: --max-wait 5s
    worker = Worker(client, ["w"], handle_signals=False, poll_wait=10)
    worker.handler("k")(lambda job: "done")
    t = background(worker)
    try:
        wait_for("the job", lambda: worker.stats.succeeded == 1, timeout=15)
    finally:
        worker.stop()
        t.join(10)
    assert client.get(id).state == "SUCCEEDED"
    assert worker.poll_wait == 5.0
    assert "polling 5.0 s instead" in capfd.readouterr().err
