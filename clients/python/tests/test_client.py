"""The client against a real `relay serve`: every call, payloads in the form
they were given, and every error as the exception named after its code."""

from __future__ import annotations

import pytest

from relay_client import (
    Client,
    DependencyNotFound,
    InvalidInput,
    InvalidState,
    LeaseLost,
    NewJob,
    NotFound,
    PayloadTooLarge,
    RelayError,
    Unauthorized,
    Unavailable,
)
from conftest import free_port


def test_submit_lease_ack_and_payloads_round_trip(client: Client):
    payloads = [{"to": "ada", "n": [1, 2.5]}, "text", 7, b"\xff\x00raw", None]
    ids = [client.submit("q", "k", p) for p in payloads]
    for id, p in zip(ids, payloads):
        assert client.get(id).payload == p
    leased = client.lease(["q"], max=10)
    assert [j.id for j in leased] == ids
    assert [j.payload for j in leased] == payloads
    assert leased[0].attempt == 1 and leased[0].kind == "k"
    client.ack(ids[0], leased[0].token, {"sent": True})
    client.ack(ids[1], leased[1].token, b"\x00\x01")
    client.ack(ids[0], leased[0].token, {"sent": True})  # repeated: answered Ok
    got = client.get(ids[0])
    assert (got.state, got.result) == ("SUCCEEDED", {"sent": True})
    assert client.get(ids[1]).result == b"\x00\x01"
    kinds = [e["kind"] for e in client.events(ids[0])]
    assert kinds == ["submitted", "leased", "succeeded"]


def test_batch_nack_extend_release_cancel_retry_delete_stats(client: Client):
    a, b, c = client.submit_batch([NewJob("q", "k", {"i": i}, max_attempts=2) for i in range(3)])
    jobs = {j.id: j for j in client.lease(["q"], max=3, lease_for=10)}
    assert set(jobs) == {a, b, c}
    expiry = client.extend(a, jobs[a].token, lease_for=60)
    assert expiry.endswith("Z")
    client.nack(a, jobs[a].token, "smtp down", retry_in=0)
    assert client.get(a).last_error == "smtp down"
    client.release(b, jobs[b].token)
    assert client.get(b).state == "READY" and client.get(b).attempts == 0
    client.release(c, jobs[c].token, in_=600)
    assert client.get(c).state == "READY"
    client.cancel(c)
    assert client.get(c).state == "CANCELLED"
    client.retry(c)
    assert client.get(c).state == "READY"
    assert client.append_event(c, "note", {"by": "ops"}) >= 1
    stats = client.stats()
    assert stats["q"]["READY"] == 3
    client.delete(c)
    with pytest.raises(NotFound):
        client.get(c)
    assert [j.id for j in client.jobs(queue="q", state="READY")] == [b, a]


def test_dependencies(client: Client):
    parent = client.submit("q", "parent")
    child = client.submit("q", "child", depends_on=[parent])
    assert (client.get(child).state, client.get(child).waiting_on) == ("WAITING", 1)
    job = client.lease(["q"])[0]
    client.ack(job.id, job.token)
    assert client.get(child).state == "READY"
    with pytest.raises(DependencyNotFound) as e:
        client.submit("q", "k", depends_on=[999_999])
    assert "999999" in str(e.value) and e.value.status == 404


def test_every_error_names_its_cause(server, client: Client):
    with pytest.raises(Unauthorized) as e:
        Client(server.url, token="wrong").stats()
    assert e.value.status == 401 and "token" in e.value.message
    with pytest.raises(Unauthorized):
        Client(server.url).stats()
    id = client.submit("q", "k")
    job = client.lease(["q"])[0]
    with pytest.raises(LeaseLost) as e:
        client.ack(id, job.token + 1)
    assert "another worker may hold it" in e.value.message
    client.ack(id, job.token)
    with pytest.raises(InvalidState) as e:
        client.nack(id, job.token, "late")
    assert "SUCCEEDED" in e.value.message
    with pytest.raises(NotFound):
        client.cancel(123_456)
    with pytest.raises(InvalidInput) as e:
        client.submit("bad queue name!", "k")
    assert e.value.code == "invalid_input"
    with pytest.raises((PayloadTooLarge, InvalidInput)) as e:
        client.submit("q", "k", "x" * (2 << 20))
    assert "limit" in e.value.message
    # Nothing of the refused calls was written.
    assert sum(client.stats()["q"][s] for s in ("READY", "LEASED", "SUCCEEDED")) == 1
    with pytest.raises(Unavailable) as e:
        Client(f"http://127.0.0.1:{free_port()}", token="t", timeout=2).stats()
    assert "cannot reach Relay" in str(e.value) and "relay serve" in str(e.value)
    assert isinstance(e.value, RelayError)


def test_tags(client: Client):
    tagged = client.submit("tags", "k", tags=["vip", "eu"])
    assert client.get(tagged).tags == ["vip", "eu"]
    assert client.get(client.submit("tags", "k")).tags == []
