"""The worker against a real `relay serve`: handlers by kind on a thread pool,
heartbeats, failures with their traceback, graceful SIGTERM, and a server
that goes away and comes back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from relay_client import Client, Permanent, Snooze, Worker
from conftest import Server, free_port

HERE = Path(__file__).resolve().parent


def wait_for(what, predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def background(worker: Worker) -> threading.Thread:
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    return t


def test_handlers_by_kind_on_a_thread_pool(client: Client):
    ok = [client.submit("q", "ok", {"n": i}) for i in range(40)]
    boom = client.submit("q", "boom", {"n": -1}, max_attempts=1)
    doomed = client.submit("q", "permanent", max_attempts=5)
    later = client.submit("q", "snooze")
    unknown = client.submit("q", "nobody-handles-this")
    worker = Worker(client, ["q"], concurrency=8, handle_signals=False, poll_wait=0.5)
    seen = set()
    lock = threading.Lock()

    @worker.handler("ok")
    def handle_ok(job):
        with lock:
            seen.add(threading.get_ident())
        time.sleep(0.02)
        return {"double": job.payload["n"] * 2}

    @worker.handler("boom")
    def handle_boom(job):
        raise ValueError("the payload was negative")

    @worker.handler("permanent")
    def handle_permanent(job):
        raise Permanent("this can never work")

    @worker.handler("snooze")
    def handle_snooze(job):
        raise Snooze(3600)

    t = background(worker)
    wait_for("every job to settle", lambda: worker.stats.succeeded == 40 and worker.stats.failed == 3)
    wait_for("the snooze", lambda: worker.stats.snoozed == 1)
    worker.stop()
    t.join(10)
    assert not t.is_alive()
    for i, id in enumerate(ok):
        job = client.get(id)
        assert (job.state, job.result) == ("SUCCEEDED", {"double": i * 2})
    assert len(seen) > 1, "ran on several threads"
    dead = client.get(boom)
    assert dead.state == "DEAD"
    assert "ValueError: the payload was negative" in dead.last_error
    assert "Traceback" in dead.last_error, "the traceback is in the error"
    assert client.get(doomed).state == "DEAD" and client.get(doomed).attempts == 1
    assert client.get(unknown).state == "DEAD"
    assert "no handler for kind 'nobody-handles-this'" in client.get(unknown).last_error
    snoozed = client.get(later)
    assert (snoozed.state, snoozed.attempts) == ("SCHEDULED", 0)


def test_heartbeats_keep_a_long_job_leased(client: Client):
    id = client.submit("q", "slow")
    worker = Worker(client, ["q"], concurrency=1, lease_for=1.2, handle_signals=False, poll_wait=0.5)

    @worker.handler("slow")
    def slow(job):
        time.sleep(3.5)  # nearly three leases long

    t = background(worker)
    wait_for("the slow job", lambda: worker.stats.succeeded == 1)
    worker.stop()
    t.join(10)
    kinds = [e["kind"] for e in client.events(id)]
    assert kinds == ["submitted", "leased", "succeeded"], f"the lease never expired: {kinds}"


def test_sigterm_releases_running_jobs_and_exits(server, client: Client):
    id = client.submit("q", "forever")
    script = (
        "import sys, time\n"
        "from relay_client import Client, Worker\n"
        "w = Worker(Client(sys.argv[1], token=sys.argv[2]), ['q'], grace=0.5, poll_wait=0.5)\n"
        "@w.handler('forever')\n"
        "def forever(job):\n"
        "    print('RUNNING', job.id, flush=True)\n"
        "    time.sleep(60)\n"
        "s = w.run()\n"
        "print('STOPPED released', s.released, flush=True)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, server.url, server.token],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().split() == ["RUNNING", str(id)]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "STOPPED released 1" in out
    job = client.get(id)
    assert (job.state, job.attempts) == ("READY", 0), "given back at once, no attempt spent"
    assert client.events(id)[-1]["kind"] == "released"


def test_a_server_that_goes_away_and_comes_back(tmp_path, capfd):
    port = free_port()
    client = Client(f"http://127.0.0.1:{port}", token="py-test-token", timeout=2)
    worker = Worker(client, ["q"], handle_signals=False, poll_wait=0.5)
    done = []

    @worker.handler("k")
    def k(job):
        done.append(job.id)

    t = background(worker)
    time.sleep(1.5)  # nothing listens: the worker retries, it does not crash
    assert t.is_alive()
    server = Server(tmp_path / "late.db", port)
    try:
        id = client.submit("q", "k")
        wait_for("the job to run once the server is up", lambda: done == [id], timeout=60)
        worker.stop()
        t.join(10)
    finally:
        server.stop()
    err = capfd.readouterr().err
    assert err.count("cannot lease") == 1, f"said once per outage: {err}"
    assert "answers again" in err


def test_the_trace_context_reaches_the_handler(client: Client):
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    traced = client.submit("t", "k", {"n": 1}, traceparent=tp)
    plain = client.submit("t", "k", {"n": 2})
    assert client.get(traced).traceparent == tp
    assert client.get(plain).traceparent is None
    seen = {}
    worker = Worker(client, ["t"], concurrency=2, handle_signals=False, poll_wait=0.5)

    @worker.handler("k")
    def handle(job):
        seen[job.id] = job.traceparent

    t = background(worker)
    wait_for("both jobs", lambda: len(seen) == 2)
    worker.stop()
    t.join(timeout=30)
    assert seen == {traced: tp, plain: None}


def test_the_worker_says_it_is_alive_what_it_runs_and_that_it_stopped(client: Client):
    ids = [client.submit("presence", "slow") for _ in range(2)]
    release = threading.Event()
    worker = Worker(client, ["presence"], concurrency=2, handle_signals=False, poll_wait=0.5, beat_every=0.2, name="py worker")

    @worker.handler("slow")
    def slow(job):
        release.wait(10)

    t = background(worker)

    def mine():
        return [w for w in client.workers() if w["id"] == worker.id]

    wait_for("the worker to say it runs both jobs", lambda: mine() and len(mine()[0]["running"]) == 2)
    w = mine()[0]
    assert worker.id.startswith("py_worker-")
    assert (w["state"], w["name"], w["pid"], w["queues"], w["concurrency"]) == ("alive", "py worker", os.getpid(), ["presence"], 2)
    assert w["version"].startswith("relay-python ")
    assert sorted(r["id"] for r in w["running"]) == sorted(ids)
    assert w["orphaned"] == []
    # Its leases name its id (only its record can show them orphaned).
    assert [client.get(i).raw["leased_by"] for i in ids] == [worker.id, worker.id]
    release.set()
    wait_for("both jobs to succeed", lambda: worker.stats.succeeded == 2)
    worker.stop()
    t.join(10)
    w = mine()[0]
    assert (w["state"], w["running"]) == ("stopped", []), w
    assert w["stopped_at"] is not None
