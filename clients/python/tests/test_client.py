"""The client against a real `relay serve`: every call, payloads in the form
they were given, and every error as the exception named after its code."""

from __future__ import annotations

import threading

import pytest

from relay_client import (
    Client,
    DependencyNotFound,
    InvalidInput,
    InvalidState,
    LeaseLost,
    LeaseRequest,
    NewJob,
    NotFound,
    Outcome,
    PayloadTooLarge,
    RelayError,
    Unauthorized,
    Unavailable,
)
from conftest import Server, free_port


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
    assert client.get(c).state == "SCHEDULED"
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


def test_scheduled_and_retrying_apart_from_ready(client: Client):
    later = client.submit("sched", "k", delay=3600)
    flaky = client.submit("sched", "k", max_attempts=3)
    [job] = client.lease(["sched"])
    assert job.id == flaky, "the scheduled job is not leased before its time"
    client.nack(flaky, job.token, "upstream 503", retry_in=600)
    assert client.get(later).state == "SCHEDULED"
    assert client.get(flaky).state == "RETRYING"
    counts = client.stats()["sched"]
    assert (counts.get("READY", 0), counts["SCHEDULED"], counts["RETRYING"]) == (0, 1, 1)
    assert [j.id for j in client.jobs(queue="sched", state="RETRYING")] == [flaky]
    assert client.lease(["sched"]) == []


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


def test_groups_take_turns_and_their_limit_holds(client: Client):
    for _ in range(5):
        client.submit("tenants", "k", "big", group="big")
    client.submit("tenants", "k", "small", group="small")
    assert client.get(client.submit("tenants", "k", "small", group="small")).group == "small"
    # One of each group a round: the small group's two before the big one's third.
    leased = client.lease(["tenants"], max=4)
    assert [j.payload for j in leased] == ["big", "small", "big", "small"]
    assert [j.group for j in leased] == ["big", "small", "big", "small"]
    client.set_queue_limits("tenants", max_leased_per_group=2)
    assert client.get_queue("tenants")["max_leased_per_group"] == 2
    assert client.lease(["tenants"], max=10) == [], "big already holds two leases"
    with pytest.raises(InvalidInput):
        client.submit("tenants", "k", group="")


def test_work_answers_a_mixed_batch_item_by_item_and_repeats_safely(client: Client):
    a, stale, doomed, later, raw = client.submit_batch([NewJob("w", "k", {"i": i}, max_attempts=3) for i in range(5)])
    next1, next2 = client.submit_batch([NewJob("w", "k", b"\x00next") for _ in range(2)])
    held = {j.id: j for j in client.work([], LeaseRequest(["w"], max=5, lease_for=60)).jobs}
    assert set(held) == {a, stale, doomed, later, raw}
    outcomes = [
        Outcome.ack(a, held[a].token, {"sent": True}),
        Outcome.ack(stale, held[stale].token + 1),  # a stale token: refused alone
        Outcome.nack(doomed, held[doomed].token, "cannot ever work", permanent=True),
        Outcome.release(later, held[later].token, in_=600),
        Outcome.ack(raw, held[raw].token, b"\xff\x00"),
    ]
    answer = client.work(outcomes, LeaseRequest(["w"], max=5, worker="py-test"))
    got = {x.id: x for x in answer.outcomes}
    assert [x.id for x in answer.outcomes] == [a, stale, doomed, later, raw], "answered in the order given"
    assert (got[a].state, got[a].ok) == ("SUCCEEDED", True)
    assert isinstance(got[stale].error, LeaseLost) and got[stale].lost and got[stale].state is None
    assert got[doomed].state == "DEAD"
    assert got[later].state == "SCHEDULED" and got[later].ready_at, "a snooze says when it is due"
    assert got[raw].state == "SUCCEEDED"
    assert sorted(j.id for j in answer.jobs) == [next1, next2], "the same call leased the ready jobs"
    assert [j.payload for j in answer.jobs] == [b"\x00next", b"\x00next"], "bytes came back as bytes"

    # The same call again (as after a lost answer): the acks are answered
    # Ok, the rest refused, nothing applied twice; no lease this time.
    again = client.work(outcomes)
    assert [x.state for x in again.outcomes if x.ok] == ["SUCCEEDED", "SUCCEEDED"]
    assert [x.id for x in again.outcomes if x.ok] == [a, raw]
    assert all(x.lost for x in again.outcomes if not x.ok), [x.error for x in again.outcomes]
    assert again.jobs == []
    assert (client.get(a).state, client.get(a).result) == ("SUCCEEDED", {"sent": True})
    assert client.get(raw).result == b"\xff\x00"
    assert (client.get(stale).state, client.get(stale).attempts) == ("LEASED", 1)
    assert (client.get(doomed).state, client.get(doomed).last_error) == ("DEAD", "cannot ever work")
    assert (client.get(later).state, client.get(later).attempts) == ("SCHEDULED", 0)
    kinds = {id: [e["kind"] for e in client.events(id)] for id in (a, doomed, later, raw)}
    assert kinds[a].count("succeeded") == 1 and kinds[raw].count("succeeded") == 1, kinds
    assert kinds[later] == ["submitted", "leased", "snoozed"], kinds
    assert kinds[doomed] == ["submitted", "leased", "failed"], kinds


def test_work_refuses_a_bad_call_as_a_whole(client: Client):
    id = client.submit("w", "k")
    job = client.lease(["w"])[0]
    with pytest.raises(InvalidInput):
        client.work([Outcome.ack(id, job.token)], LeaseRequest(["bad queue name!"]))
    assert client.get(id).state == "LEASED", "nothing of a refused call is applied"
    with pytest.raises(TypeError):
        Outcome.ack(id, job.token, {1, 2})  # not JSON: refused where it is made


def test_an_empty_heartbeat_renews_nothing(client: Client):
    """Issue 42: a worker holding nothing renews nothing (it was a 400)."""
    assert client.heartbeat([]) == []


def test_heartbeat_extends_many_leases_and_answers_each(client: Client):
    ids = client.submit_batch([NewJob("h", "k") for _ in range(4)])
    jobs = {j.id: j for j in client.lease(["h"], max=4, lease_for=5)}
    done, gone = ids[2], ids[3]
    client.ack(done, jobs[done].token)
    client.cancel(ids[1])
    client.cancel(gone)
    client.delete(gone)
    answers = client.heartbeat(
        [(ids[0], jobs[ids[0]].token, 120), (ids[1], jobs[ids[1]].token), jobs[done], (gone, jobs[gone].token)],
        lease_for=60,
    )
    assert [x.id for x in answers] == ids
    assert answers[0].ok and str(answers[0].lease_expires_at).endswith("Z")
    assert [type(x.error) for x in answers[1:]] == [InvalidState, InvalidState, NotFound]
    assert all(x.lost for x in answers[1:])
    stale = client.heartbeat([(ids[0], jobs[ids[0]].token + 1)])
    assert isinstance(stale[0].error, LeaseLost) and stale[0].lost


def test_calls_share_a_keep_alive_connection_that_survives_a_restart(tmp_path):
    port = free_port()
    server = Server(tmp_path / "r.db", port)
    client = Client(server.url, token=server.token)
    try:
        client.submit("q", "k")
        sock = client._connections.conn.sock
        for _ in range(20):
            client.stats()
        assert client._connections.conn.sock is sock, "one connection for every call of this thread"
        other = []
        t = threading.Thread(target=lambda: other.append((client.stats(), client._connections.conn.sock)))
        t.start()
        t.join()
        assert other[0][1] is not sock, "each thread has its own"
        server.stop()
        server = Server(tmp_path / "r.db", port)
        # The idle connection died with the old server: sent again on a new one.
        assert client.stats()["q"]["READY"] == 1
        assert client._connections.conn.sock is not sock
    finally:
        server.stop()
    with pytest.raises(Unavailable):
        client.stats()  # nothing listens: a new connection fails, no retry hides it


def test_an_idempotency_key_makes_one_job_even_after_it_finished(client: Client):
    first = client.submit("idem", "charge", {"order": 1}, idempotency_key="order-1")
    assert first.existing is False
    again = client.submit("idem", "charge", {"order": 1}, idempotency_key="order-1")
    assert (again, again.existing) == (first, True), "the first submit's job, nothing made"
    [job] = client.lease(["idem"])
    assert job.id == first
    client.ack(job.id, job.token)
    assert client.get(first).state == "SUCCEEDED"
    # Unlike a unique key, the idempotency key still holds once the job finished.
    later = client.submit("idem", "charge", {"order": 1}, idempotency_key="order-1")
    assert (later, later.existing) == (first, True)
    other = client.submit("idem", "charge", {"order": 2}, idempotency_key="order-2")
    assert other != first and other.existing is False
    assert sorted(j.id for j in client.jobs(queue="idem")) == sorted([first, other]), "two jobs made, no more"
    plain = client.submit("idem", "charge")
    assert plain.existing is False and isinstance(plain, int) and f"{plain}" == str(int(plain))


def test_a_batch_with_an_idempotency_key_answers_the_same_ids_again(client: Client):
    jobs = [NewJob("idem-batch", "k", {"i": i}) for i in range(3)]
    ids = client.submit_batch(jobs, idempotency_key="batch-1")
    assert client.submit_batch(jobs, idempotency_key="batch-1") == ids
    assert len(client.jobs(queue="idem-batch")) == 3, "the repeat made nothing"
    # The header's key K gives the jobs K/0, K/1, ... by index.
    again = client.submit("idem-batch", "k", idempotency_key="batch-1/1")
    assert (again, again.existing) == (ids[1], True)
    # A job may carry its own key, which wins over the header's.
    mine = client.submit("idem-batch", "k", idempotency_key="mine")
    other = client.submit_batch([NewJob("idem-batch", "k"), NewJob("idem-batch", "k", idempotency_key="mine")], idempotency_key="batch-2")
    assert other[1] == mine and other[0] not in ids
    assert client.submit_batch([NewJob("idem-batch", "k"), NewJob("idem-batch", "k", idempotency_key="mine")], idempotency_key="batch-2") == other
    assert len(client.jobs(queue="idem-batch")) == 5


def test_payloads_keep_their_key_order_and_numbers_and_deep_nesting_is_a_typed_error(client: Client):
    # Issue 24, item 5: the server re-parsed payloads, so keys came back
    # sorted and big integers rounded; it now sends the text stored.
    text = b'{"b":1,"a":12345678901234567890123,"c":[1,2]}'
    id = client.submit("q", "k", text)  # bytes: stored exactly as given
    got = client.get(id).payload
    assert list(got) == ["b", "a", "c"] and got["a"] == 12345678901234567890123
    assert client.lease(["q"])[0].payload == got
    # JSON nested past what Python's json module reads: a RelayError that
    # says so, not a RecursionError out of the client.
    deep = b"[" * 5000 + b"]" * 5000
    deep_id = client.submit("deep", "k", deep)
    with pytest.raises(RelayError, match="nested deeper"):
        client.get(deep_id)


def test_stats_follows_every_page_of_queues(client: Client):
    # The server answers 1,000 queues a page: stats() reads them all.
    client.submit_batch([NewJob(f"q{i:04}", "k", {}) for i in range(1003)])
    client.submit_batch([NewJob("q0007", "k", {})])
    stats = client.stats()
    assert len(stats) == 1003
    assert stats["q1002"]["READY"] == 1 and stats["q0007"]["READY"] == 2
    first = client.stats_page(limit=2)
    assert list(first["queues"]) == ["q0000", "q0001"] and first["next"] == "q0001"
    assert first["totals"]["queues"] == 1003 and first["totals"]["jobs"]["READY"] == 1004
    last = client.stats_page(after="q1000")
    assert list(last["queues"]) == ["q1001", "q1002"]
    assert last["next"] is None and last["totals"] is None
    with pytest.raises(RelayError, match="limit"):
        client.stats_page(limit=1001)
