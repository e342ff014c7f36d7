"""Issue 40, acceptance 3: the server killed with SIGKILL (three times, and
started again on its file and port) under a Worker running 1,000 five-step
workflows, each with a sleep and a wait for an event that another thread
emits: every workflow finishes, and each step's body ran exactly once (the
Worker never dies here, so no body may run again: a record, ack, sleep or
wait whose call the kill cut is sent again, and the server answers it from
what it recorded)."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter

from conftest import Server, free_port

from relay_client import Client, JobContext, NewJob, RelayError, Worker

WORKFLOWS = 1000
STEPS = 5


def test_workflows_finish_and_steps_run_once_across_kill_9_of_the_server(tmp_path, capfd):
    db = tmp_path / "flows.db"
    port = free_port()
    server = Server(db, port)
    client = Client(server.url, token=server.token, timeout=5)
    ids = client.submit_batch([NewJob("flows", "flow") for _ in range(WORKFLOWS)])

    ran: Counter = Counter()
    lock = threading.Lock()

    def body(id: int, i: int) -> str:
        with lock:
            ran[(id, i)] += 1
        return f"{id}-{i}"

    worker = Worker(client, ["flows"], concurrency=32, handle_signals=False, poll_wait=0.5, lease_for=5, beat_every=0.5)

    @worker.handler("flow")
    def flow(job, ctx: JobContext):
        out = []
        for i in range(STEPS):
            if i == 2:
                ctx.sleep("nap", 0.05)
            if i == 4:
                ctx.wait_event("go", f"go:{job.id}", 600)
            out.append(ctx.step(f"s{i}", lambda i=i: body(job.id, i)))
        return out

    # The events, emitted in order while the workflows run (some before
    # their job waits, most after), each retried until the server answers.
    emitter_client = Client(server.url, token=server.token, timeout=5)

    def emit_all():
        for id in ids:
            while True:
                try:
                    emitter_client.emit(f"go:{id}", {"id": id})
                    break
                except (RelayError, OSError):
                    time.sleep(0.05)
            time.sleep(0.003)

    emitter = threading.Thread(target=emit_all, daemon=True)
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    emitter.start()

    kills = 0
    finished_at_kills = []
    try:
        for _ in range(3):
            time.sleep(random.uniform(0.6, 1.5))
            finished_at_kills.append(client.stats().get("flows", {}).get("SUCCEEDED", 0))
            os.kill(server.proc.pid, signal.SIGKILL)
            server.proc.wait()
            kills += 1
            time.sleep(0.3)
            server = Server(db, port)
        deadline = time.monotonic() + 180
        counts: dict = {}
        while True:
            try:
                counts = client.stats().get("flows", {})
                if counts.get("SUCCEEDED", 0) == WORKFLOWS:
                    break
            except (RelayError, OSError):
                pass
            assert time.monotonic() < deadline, f"the workflows did not all finish: {counts}"
            time.sleep(0.2)
        worker.stop()
        t.join(30)
        emitter.join(30)
        for id in random.sample(ids, 50):
            job = client.get(id)
            assert job.result == [f"{id}-{i}" for i in range(STEPS)]
            assert [s["name"] for s in job.steps] == ["s0", "s1", "nap", "s2", "s3", "go", "s4"]
            assert job.steps[5]["output"] == {"event": {"id": id}}
    finally:
        server.stop()
    missing = [(id, i) for id in ids for i in range(STEPS) if ran[(id, i)] == 0]
    again = {k: n for k, n in ran.items() if n > 1}
    assert not missing, f"{len(missing)} step bodies never ran, e.g. {missing[:5]}"
    assert not again, f"{len(again)} step bodies ran more than once, e.g. {list(again.items())[:5]}"
    err = capfd.readouterr().err
    assert kills == 3 and err.count("answers again") >= 1, err
    assert finished_at_kills[0] < WORKFLOWS, "the first kill came after the work: it proves nothing"
    print(
        f"{WORKFLOWS} workflows across {kills} kills of the server (finished before each: {finished_at_kills}): "
        f"{sum(ran.values())} step bodies, each ran once"
    )
