"""The README's Python worker runs as written: it submits a job, runs it, and
stops cleanly on SIGTERM. The client README's batch calls run as written."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from conftest import REPO
from relay_client import NewJob


def readme_snippet() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## From Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README.md has no Python snippet under 'From Python'"
    return match.group(1)


def test_the_readme_worker_runs_as_written(server, client, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(readme_snippet())
    env = dict(os.environ, RELAY_URL=server.url, RELAY_TOKEN=server.token)
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "sending to ada@example.com"
        deadline = time.monotonic() + 30
        while client.stats().get("emails", {}).get("SUCCEEDED") != 1:
            assert time.monotonic() < deadline, "the README's job never succeeded"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    job = client.jobs(queue="emails")[0]
    assert job.result == {"sent": True}


def test_the_client_readmes_batch_calls_run_as_written(server, client, tmp_path):
    text = (REPO / "clients" / "python" / "README.md").read_text()
    section = text.split("## Many jobs in one call", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "clients/python/README.md has no snippet under 'Many jobs in one call'"
    snippet = match.group(1).replace("http://127.0.0.1:7433", server.url).replace('"secret"', repr(server.token))
    ids = [client.submit("emails", "send", {"to": f"{n}@example.com"}) for n in range(12)]
    script = tmp_path / "batch.py"
    script.write_text(snippet)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:10] == [f"{id} SUCCEEDED" for id in ids[:10]]
    assert [client.get(id).state for id in ids] == ["SUCCEEDED"] * 10 + ["LEASED"] * 2


def test_the_client_readmes_operating_calls_run_as_written(server, client, tmp_path):
    text = (REPO / "clients" / "python" / "README.md").read_text()
    section = text.split("## Operating queues", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "clients/python/README.md has no snippet under 'Operating queues'"
    snippet = match.group(1).replace("http://127.0.0.1:7433", server.url).replace('"secret"', repr(server.token))
    ids = client.submit_batch([NewJob("emails", "send", max_attempts=1) for _ in range(2)])
    for job in client.lease(["emails"], max=2):
        client.nack(job.id, job.token, "smtp down")
    script = tmp_path / "operate.py"
    script.write_text(snippet)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"{ids[1]} smtp down",
        f"{ids[0]} smtp down",
        "emails send 2 smtp down",
        "2 retried",
        "['digest'] ['emails'] ok",
    ]
    assert [client.get(id).state for id in ids] == ["READY", "READY"]
    assert client.stats()["emails"]["max_leased"] == 10
