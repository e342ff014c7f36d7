"""The guides' Python examples run as written against a real server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

from conftest import REPO


def snippet(guide: str, section: str) -> str:
    text = (REPO / "docs" / "guides" / guide).read_text()
    part = text.split(section, 1)[1]
    match = re.search(r"```python\n(.*?)```", part, re.S)
    assert match, f"{guide} has no Python example under {section!r}"
    return match.group(1)


def test_the_durable_execution_guide_runs_as_written(server, client, tmp_path):
    script = tmp_path / "order.py"
    script.write_text(snippet("durable-execution.md", "## In Python"))
    env = dict(os.environ, RELAY_URL=server.url, RELAY_TOKEN=server.token)
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        # Charged, asleep half a second, woken by the emit (the worker free meanwhile), then the email.
        assert proc.stdout.readline().strip() == "receipt ch_4200, parcel 1Z999, to ada"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    job = client.list_jobs(queue="orders").jobs[0]
    assert job.state == "SUCCEEDED" and job.attempts == 1
    assert [s["name"] for s in job.steps] == ["charge", "cool-off", "shipment", "email"]
    kinds = [e["kind"] for e in client.events(job.id)]
    assert "sleeping" in kinds and "woken" in kinds
