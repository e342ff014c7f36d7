"""Transactional enqueue from Python on PostgreSQL: `relay_submit(...)`
called with psycopg inside the application's own transaction. Rolled
back: no job. Committed: the job exists, and a Rust worker (`relay work`
on the same database) runs it. A private PostgreSQL server is started for
this module (initdb in a temporary directory, as the `postgres` user when
the tests run as root) and stopped after."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from conftest import RELAY


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@pytest.fixture(scope="module")
def pg_url():
    for tool in ("initdb", "pg_ctl"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not on the PATH: install PostgreSQL (the image has it)")
    root = Path(tempfile.mkdtemp(prefix="relay-py-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", _free_port()
    subprocess.run(_as_postgres(["initdb", "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"]),
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(_as_postgres(["pg_ctl", "-D", str(data), "-l", str(root / "log"), "-w", "-o",
                                 f"-p {port} -k {root} -c listen_addresses=127.0.0.1", "start"]),
                   check=True, stdout=subprocess.DEVNULL)
    try:
        admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute("CREATE DATABASE shop")
        yield f"postgresql://postgres@127.0.0.1:{port}/shop"
    finally:
        subprocess.run(_as_postgres(["pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"]),
                       stdout=subprocess.DEVNULL)
        shutil.rmtree(root, ignore_errors=True)


def _wait(what: str, check, seconds: float = 30.0):
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds} s")
        time.sleep(0.05)


def test_relay_submit_with_psycopg_commits_or_rolls_back_with_the_transaction(pg_url, tmp_path):
    out = tmp_path / "ran.txt"
    # The Rust worker: opens (and migrates) the database, runs each job by
    # appending its payload to a file.
    worker = subprocess.Popen(
        [RELAY, "--db", pg_url, "work", "--queue", "emails", "--exec", f"cat >> {out}; echo >> {out}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with psycopg.connect(pg_url) as conn:
            _wait("the worker migrated the database", lambda: conn.execute(
                "SELECT count(*) FROM pg_proc WHERE proname = 'relay_submit'").fetchone()[0])
            conn.commit()
            conn.execute("CREATE TABLE orders (id INT PRIMARY KEY)")
            conn.commit()

            class Rollback(Exception):
                pass

            with pytest.raises(Rollback):
                with conn.transaction():
                    conn.execute("INSERT INTO orders VALUES (1)")
                    conn.execute("SELECT relay_submit('emails', 'confirm', %s)",
                                 (json.dumps({"order": 1}).encode(),))
                    raise Rollback()
            assert conn.execute("SELECT count(*) FROM relay_jobs").fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 0

            with conn.transaction():
                conn.execute("INSERT INTO orders VALUES (2)")
                job_id = conn.execute("SELECT relay_submit('emails', 'confirm', %s, p_priority => 2)",
                                      (json.dumps({"order": 2}).encode(),)).fetchone()[0]
            conn.commit()

            # The Rust worker ran it (woken by the commit's NOTIFY).
            ran = _wait("the worker ran the job", lambda: out.exists() and out.read_text().strip())
            assert json.loads(ran) == {"order": 2}
            state = _wait("the job SUCCEEDED", lambda: conn.execute(
                "SELECT state FROM relay_jobs WHERE id = %s AND state = 'SUCCEEDED'", (job_id,)).fetchone())
            conn.commit()
            assert state[0] == "SUCCEEDED"
            assert conn.execute("SELECT count(*) FROM relay_jobs").fetchone()[0] == 1

            # A bad argument aborts the application's transaction, as any
            # error does: its own row goes too.
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="invalid priority"):
                with conn.transaction():
                    conn.execute("INSERT INTO orders VALUES (3)")
                    conn.execute("SELECT relay_submit('emails', 'confirm', '', p_priority => 9)")
            assert conn.execute("SELECT count(*) FROM orders WHERE id = 3").fetchone()[0] == 0
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def test_relay_emit_with_psycopg_wakes_a_waiting_workflow_at_commit(pg_url):
    """`relay_emit(key, payload)` inside the application's transaction
    (issue 40): rolled back, the workflow still waits; committed, its
    handler goes on with the payload, woken by the commit."""
    import threading

    from conftest import Server, free_port

    from relay_client import Client, JobContext, Worker

    server = Server(pg_url, free_port())
    try:
        client = Client(server.url, token=server.token)
        id = client.submit("shipping", "ship", {"order": 7})
        got = []
        worker = Worker(client, ["shipping"], handle_signals=False, poll_wait=0.5)

        @worker.handler("ship")
        def ship(job, ctx: JobContext):
            got.append(ctx.wait_event("shipped", f"shipped:{job.payload['order']}", 60))

        t = threading.Thread(target=worker.run, daemon=True)
        t.start()
        _wait("the job to wait", lambda: client.get(id).state == "WAITING")
        with psycopg.connect(pg_url) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS shipments (id INT PRIMARY KEY)")
            conn.commit()

            class Rollback(Exception):
                pass

            with pytest.raises(Rollback):
                with conn.transaction():
                    conn.execute("INSERT INTO shipments VALUES (7)")
                    first, woken = conn.execute("SELECT * FROM relay_emit('shipped:7', %s)",
                                                (json.dumps({"carrier": "ups"}).encode(),)).fetchone()
                    assert (first, woken) == (True, 1)
                    raise Rollback()
            time.sleep(0.5)
            assert client.get(id).state == "WAITING" and got == []

            with conn.transaction():
                conn.execute("INSERT INTO shipments VALUES (7)")
                conn.execute("SELECT * FROM relay_emit('shipped:7', %s)", (json.dumps({"carrier": "ups"}).encode(),))
            _wait("the workflow to finish", lambda: client.get(id).state == "SUCCEEDED")
            assert got == [{"carrier": "ups"}]
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="invalid key"):
                conn.execute("SELECT * FROM relay_emit('no spaces', '')")
        worker.stop()
        t.join(10)
    finally:
        server.stop()
