"""The worker over the batch calls (issue 27), against a real `relay serve`:
outcomes and leases in few `/v1/work` calls, one heartbeat call for every
lease, a kill -9 of the server mid-run, leases lost mid-batch, and a stop
that reports what finishes in the grace and releases the rest in one call."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Iterable, List, Optional, Tuple

from relay_client import Client, LeaseRequest, NewJob, Outcome, Permanent, Stats, Worker
from conftest import Server, free_port
from test_worker import background, wait_for


class Recording(Client):
    """A client that records the worker's requests: every path called, and
    the outcomes of each ``work`` call."""

    def __init__(self, url: str, token: str, **kwargs: Any):
        super().__init__(url, token=token, **kwargs)
        self.lock = threading.Lock()
        self.paths: Counter = Counter()
        self.reports: List[List[Tuple[int, str]]] = []

    def _call(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.paths[path.split("?")[0] if not path.startswith("/v1/jobs/") else "/v1/jobs/{id}"] += 1
        return super()._call(method, path, *args, **kwargs)

    def work(self, outcomes: Iterable[Outcome] = (), lease: Optional[LeaseRequest] = None) -> Any:
        outcomes = list(outcomes)
        if outcomes:
            with self.lock:
                self.reports.append([(o.id, o.outcome) for o in outcomes])
        return super().work(outcomes, lease)

    def sent(self) -> List[int]:
        """The ids of every outcome sent."""
        with self.lock:
            return [id for report in self.reports for id, _ in report]


def submit(client: Client, queue: str, n: int, **fields: Any) -> List[int]:
    ids: List[int] = []
    for start in range(0, n, 1000):
        ids += client.submit_batch([NewJob(queue, "k", {"n": i}, **fields) for i in range(start, min(n, start + 1000))])
    return ids


def kinds(client: Client, id: int) -> List[str]:
    return [e["kind"] for e in client.events(id)]


def test_drains_5000_jobs_at_concurrency_64_in_batches(server):
    client = Recording(server.url, server.token)
    ids = submit(client, "bulk", 5000)
    worker = Worker(client, ["bulk"], concurrency=64, handle_signals=False, poll_wait=0.5)
    threads = set()

    @worker.handler("k")
    def noop(job):
        threads.add(threading.current_thread().name)

    client.paths.clear()
    t = background(worker)
    wait_for("5,000 jobs", lambda: worker.stats.succeeded == 5000, timeout=240)
    worker.stop()
    t.join(10)
    assert not t.is_alive()
    calls = dict(client.paths)
    assert worker.stats == Stats(succeeded=5000)
    assert client.stats()["bulk"]["SUCCEEDED"] == 5000
    assert len(threads) <= 64, f"a pool of 64 threads, not a thread per job: {len(threads)} ran handlers"
    assert sum(calls.values()) <= 5000 / 8, f"outcomes and leases travel in batches: {calls}"
    for id in ids[::10]:
        assert kinds(client, id) == ["submitted", "leased", "succeeded"]


def test_a_kill_9_of_the_server_mid_run(tmp_path, capfd):
    port = free_port()
    db = tmp_path / "crash.db"
    server = Server(db, port)
    client = Client(server.url, token=server.token, timeout=5)
    ids = submit(client, "crash", 2000, max_attempts=5)
    # A short lease: the jobs leased by a call whose answer died with the
    # server come back soon after the restart.
    worker = Worker(client, ["crash"], concurrency=32, lease_for=3, handle_signals=False, poll_wait=0.5)
    runs: Counter = Counter()
    lock = threading.Lock()

    @worker.handler("k")
    def handle(job):
        with lock:
            runs[job.id] += 1
        time.sleep(0.002)
        if job.payload["n"] % 7 == 0:
            raise Permanent("every 7th job fails for good")
        return {"n": job.payload["n"]}

    def settled() -> int:
        counts = client.stats().get("crash", {})
        return counts.get("SUCCEEDED", 0) + counts.get("DEAD", 0)

    t = background(worker)
    try:
        wait_for("a quarter of the jobs", lambda: worker.stats.succeeded + worker.stats.failed >= 500)
        server.proc.kill()
        server.proc.wait()
        time.sleep(1.0)  # handlers end while nothing answers: their outcomes are kept
        server = Server(db, port)
        wait_for("every job settled after the restart", lambda: settled() == 2000, timeout=120)
        worker.stop()
        t.join(30)
        assert not t.is_alive()
        succeeded = 0
        for id in ids:
            job = client.get(id)
            seen = kinds(client, id)
            assert seen.count("succeeded") == (job.state == "SUCCEEDED"), (id, job.state, seen)
            if job.payload["n"] % 7 == 0:
                assert (job.state, job.result) == ("DEAD", None), (id, seen)
                assert "every 7th job fails for good" in job.last_error
            else:
                assert (job.state, job.result) == ("SUCCEEDED", job.payload), (id, seen)
                succeeded += 1
    finally:
        server.stop()
    assert succeeded == 1714
    # Every success counted once, the ones whose answer died with the
    # server too: their outcomes were kept and sent again.
    assert worker.stats.succeeded == succeeded, worker.stats
    assert max(runs.values()) <= 2, "a job runs again only when its lease was lost"
    err = capfd.readouterr().err
    assert err.count("retrying with back-off") == 1, f"said once per outage: {err}"
    assert "answers again" in err
    assert "could not report" not in err, err


def test_leases_answered_lost_drop_exactly_those_outcomes(server):
    client = Recording(server.url, server.token)
    other = Client(server.url, token=server.token)
    ids = submit(client, "hb", 20)
    taken, cancelled, deleted = ids[:3], ids[3:6], ids[6:8]
    gone = set(taken + cancelled + deleted)
    gate = threading.Event()
    tokens = {}
    worker = Worker(client, ["hb"], concurrency=20, lease_for=1.5, handle_signals=False, poll_wait=0.5)

    @worker.handler("k")
    def handle(job):
        tokens[job.id] = job.token
        assert gate.wait(30)
        return {"by": "worker"}

    t = background(worker)
    try:
        wait_for("all 20 handlers running", lambda: len(tokens) == 20)
        # Another client takes three leases over, cancels three jobs and
        # deletes two, while their handlers run.
        for id in taken:
            other.release(id, tokens[id])
        stolen = {j.id: j for j in other.lease(["hb"], max=10, lease_for=60)}
        assert set(stolen) == set(taken)
        for id in cancelled + deleted:
            other.cancel(id)
        for id in deleted:
            other.delete(id)
        beats = client.paths["/v1/heartbeat"]
        time.sleep(1.5)  # a lease's length: the heartbeats (every 0.5 s) answer those leases lost
        beats = client.paths["/v1/heartbeat"] - beats
        gate.set()
        wait_for("the other jobs", lambda: worker.stats.succeeded == 12 and worker.stats.lost == 8)
        worker.stop()
        t.join(10)
    finally:
        gate.set()
    assert worker.stats == Stats(succeeded=12, lost=8)
    assert 2 <= beats <= 5, f"one heartbeat call for all leases every third of a lease: {beats} in 1.5 s"
    assert gone.isdisjoint(client.sent()), "a lease answered lost drops its outcome: never sent"
    for id in ids:
        if id in deleted:
            continue
        job = client.get(id)
        if id in taken:
            assert job.state == "LEASED", "still the other client's"
        elif id in cancelled:
            assert job.state == "CANCELLED"
        else:
            assert (job.state, job.result) == ("SUCCEEDED", {"by": "worker"})
            assert kinds(client, id) == ["submitted", "leased", "succeeded"], "kept leased by the heartbeat"
    for id, job in stolen.items():
        other.ack(id, job.token, {"by": "other"})
        assert client.get(id).result == {"by": "other"}


def test_stop_reports_what_ends_in_the_grace_and_releases_the_rest_in_one_call(server):
    client = Recording(server.url, server.token)
    quick = client.submit_batch([NewJob("s", "quick") for _ in range(3)])
    slow = client.submit_batch([NewJob("s", "slow") for _ in range(3)])
    stopping, never = threading.Event(), threading.Event()
    running = set()
    worker = Worker(client, ["s"], concurrency=6, grace=1.0, handle_signals=False, poll_wait=0.5)

    @worker.handler("quick")
    def handle_quick(job):
        running.add(job.id)
        stopping.wait(30)
        time.sleep(0.2)
        return "finished in the grace"

    @worker.handler("slow")
    def handle_slow(job):
        running.add(job.id)
        never.wait(30)

    t = background(worker)
    try:
        wait_for("six handlers running", lambda: len(running) == 6)
        worker.stop()
        stopping.set()
        t.join(10)
        assert not t.is_alive()
    finally:
        never.set()
    assert worker.stats == Stats(succeeded=3, released=3)
    for id in quick:
        assert (client.get(id).state, client.get(id).result) == ("SUCCEEDED", "finished in the grace")
    for id in slow:
        job = client.get(id)
        assert (job.state, job.attempts) == ("READY", 0), "given back untried"
    releases = [r for r in client.reports if any(what == "release" for _, what in r)]
    assert releases == [[(id, "release") for id in slow]], "released in one call"
