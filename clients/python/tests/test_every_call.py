"""Every operation of /openapi.json has a method on the client, and the
calls operators use (search, bulk actions, dead groups, queues, pause,
limits, schedules, health, metrics) work against a real `relay serve`."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from relay_client import Client, InvalidInput, InvalidRequest, JobTemplate, LeaseLost, NewJob, NotFound, Schedule

# Operations whose method has another name than the operationId in
# snake_case (`list` would hide Python's builtin in the class).
RENAMED = {"list": "list_jobs"}


def snake(operation_id: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", operation_id).lower()


def test_every_operation_has_a_client_method(server):
    with urllib.request.urlopen(server.url + "/openapi.json", timeout=10) as r:
        doc = json.load(r)
    operations = [
        op["operationId"]
        for ops in doc["paths"].values()
        for method, op in ops.items()
        if method in ("get", "put", "post", "delete", "patch")
    ]
    assert len(operations) >= 30, operations
    missing = [
        f"{op} (Client.{RENAMED.get(op, snake(op))})"
        for op in operations
        if not callable(getattr(Client, RENAMED.get(op, snake(op)), None))
    ]
    assert not missing, f"operations of /openapi.json without a client method: {missing}"


def test_search_pages_through_every_filter(client: Client):
    ids = client.submit_batch(
        [NewJob("mail", "send", {"i": i}, tags=["vip"] if i % 2 else None) for i in range(5)]
        + [NewJob("sms", "send", {"i": 9})]
    )
    page = client.list_jobs(queue="mail", limit=2)
    assert [j.id for j in page.jobs] == [ids[4], ids[3]]
    assert page.next is not None
    assert [j.id for j in client.iter_jobs(queue="mail", limit=2)] == ids[4::-1]
    assert [j.id for j in client.list_jobs(tag="vip").jobs] == [ids[3], ids[1]]
    assert client.list_jobs(kind="nope").jobs == []
    assert client.list_jobs(kind="send", limit=1000).next is None
    assert len(client.jobs(queue="", state="")) == 6  # an empty filter is none
    with pytest.raises(InvalidRequest):
        client.list_jobs(since="yesterday")


def test_bulk_and_dead_groups(client: Client):
    ids = client.submit_batch([NewJob("q", "k", i, max_attempts=1) for i in range(3)])
    for j in client.lease(["q"], max=3):
        client.nack(j.id, j.token, "smtp down\nat line 2")
    [group] = client.dead_groups()
    assert (group.queue, group.kind, group.error, group.count) == ("q", "k", "smtp down", 3)
    assert group.newest == ids[-1] and group.last_at.endswith("Z")
    assert client.bulk("retry", queue="q", state="DEAD") == 3
    assert {client.get(i).state for i in ids} == {"READY"}
    assert client.bulk("cancel", error_contains="smtp") == 3
    assert client.bulk("delete", queue="q", state="CANCELLED") == 3
    assert client.list_jobs(queue="q").jobs == []
    client.submit("q", "k")
    with pytest.raises(InvalidRequest):
        client.bulk("delete")  # no filter: refused, nothing deleted
    assert len(client.list_jobs(queue="q").jobs) == 1


def test_queues_pause_and_limits(client: Client):
    for q in ("a", "b", "c"):
        client.submit(q, "k")
    assert client.queues() == ["a", "b", "c"]
    assert client.queues_page(limit=2) == {"queues": ["a", "b"], "next": "b"}
    assert client.pause_queue("a") is True
    assert client.lease(["a"]) == []
    assert client.stats()["a"]["paused"] is True
    one = client.get_queue("a")
    assert (one["queue"], one["READY"], one["paused"], one["max_leased"]) == ("a", 1, True, None)
    assert client.get_queue("unused")["READY"] == 0
    assert client.resume_queue("a") is False
    assert len(client.lease(["a"])) == 1
    for _ in range(3):
        client.submit("b", "k")
    limits = client.set_queue_limits("b", max_leased=2, rate_limit=(100, 1.0), poison_after=5)
    assert (limits.queue, limits.max_leased, limits.rate_limit, limits.poison_after) == ("b", 2, {"limit": 100, "per_ms": 1000}, 5)
    assert client.get_queue("b")["poison_after"] == 5
    assert len(client.lease(["b"], max=10)) == 2
    lifted = client.set_queue_limits("b")
    assert (lifted.max_leased, lifted.rate_limit, lifted.poison_after) == (None, None, None)
    assert len(client.lease(["b"], max=10)) == 2


def test_retention_and_prune(client: Client):
    shown = client.get_retention("r")
    week = 7 * 24 * 3600 * 1000
    assert (shown.queue, shown.own, shown.effective) == (
        "r",
        {},
        {"succeeded": week, "dead": week, "cancelled": week},
    )
    kept = client.set_retention("r", succeeded=0, dead="forever")
    assert kept.own == {"succeeded": 0, "dead": "forever"}
    assert kept.effective == {"succeeded": 0, "dead": "forever", "cancelled": week}
    assert client.get_retention("r") == kept
    with pytest.raises(InvalidInput):
        client.set_retention("r", dead=11 * 366 * 86400)
    with pytest.raises(ValueError):
        client.set_retention("r", dead="1d")
    assert client.get_retention("r") == kept, "a refused retention changes nothing"
    ok, dead, other = client.submit("r", "k"), client.submit("r", "k", max_attempts=1), client.submit("o", "k")
    for job in client.lease(["r"], max=2):
        if job.id == ok:
            client.ack(job.id, job.token)
        else:
            client.nack(job.id, job.token, "bad")
    # The server may prune the SUCCEEDED one by itself first.
    assert client.prune() in (0, 1)
    with pytest.raises(NotFound):
        client.get(ok)
    assert client.get(dead).state == "DEAD", "DEAD is kept forever here"
    assert client.get(other).state == "READY"
    assert client.prune_from(0) == {"deleted": 0, "next": None}


def test_schedules_from_put_to_remove(client: Client):
    made = client.put_schedule("nightly", JobTemplate("reports", "build", {"full": True}, priority=2), cron="0 3 * * *", tz="Europe/Paris")
    assert isinstance(made, Schedule)
    assert (made.name, made.cron, made.tz, made.every_ms, made.paused) == ("nightly", "0 3 * * *", "Europe/Paris", None, False)
    assert (made.job.queue, made.job.kind, made.job.payload, made.job.priority) == ("reports", "build", {"full": True}, 2)
    client.put_schedule("often", JobTemplate("q", "tick", b"\x00raw", group="tenant-7"), every=60)
    assert [s.name for s in client.schedules()] == ["nightly", "often"]
    assert client.schedules()[1].job.payload == b"\x00raw"
    assert [s.job.group for s in client.schedules()] == [None, "tenant-7"]
    assert client.pause_schedule("often").paused is True
    one = client.get_schedule("often")
    assert (one.name, one.every_ms, one.paused, one.job.payload) == ("often", 60000, True, b"\x00raw")
    assert client.resume_schedule("often").paused is False
    assert client.remove_schedule("often") is True
    with pytest.raises(NotFound):
        client.remove_schedule("often")
    with pytest.raises(NotFound):
        client.get_schedule("often")
    with pytest.raises(InvalidInput):
        client.put_schedule("bad", JobTemplate("q", "k"), cron="not cron")
    assert [s.name for s in client.schedules()] == ["nightly"]


def test_health_and_metrics(client: Client):
    assert client.health() == {"status": "ok"}
    client.submit("q", "k")
    text = client.metrics()
    assert 'relay_jobs{queue="q",state="READY"} 1' in text


def test_metrics_parse_as_prometheus_text(client: Client):
    """/metrics as Prometheus's own Python parser reads it: every family
    typed, histograms whole (buckets, sum, count), long-polls apart."""
    from prometheus_client.parser import text_string_to_metric_families

    client.submit("scraped", "k")
    client.submit("scraped", 'say "hi"\\')
    leased = client.lease(["scraped"], max=2)
    client.lease(["nothing-here"], wait=0.2)
    # Their outcomes: one succeeded, one failed for good.
    done = {j.kind: j for j in leased}
    client.ack(done["k"].id, done["k"].token)
    client.nack(done['say "hi"\\'].id, done['say "hi"\\'].token, "no", permanent=True)
    families = {f.name: f for f in text_string_to_metric_families(client.metrics())}
    assert families["relay_http_requests"].type == "counter"
    assert families["relay_commits"].type == "counter"
    assert families["relay_jobs"].type == "gauge"
    assert families["relay_leases_expired"].type == "counter"
    assert families["relay_leases_lost"].type == "counter"
    ages = {s.labels["queue"]: s.value for s in families["relay_queue_oldest_ready_age_seconds"].samples}
    assert families["relay_queue_oldest_ready_age_seconds"].type == "gauge"
    assert ages.get("scraped") == 0, ages  # its jobs are leased: none waits
    waits = families["relay_queue_wait_seconds"]
    assert waits.type == "histogram"
    kinds = {s.labels["kind"] for s in waits.samples if s.labels.get("queue") == "scraped"}
    assert kinds == {"k", 'say "hi"\\'}, kinds  # a kind's quotes and backslash escaped
    runs = families["relay_job_run_seconds"]
    assert runs.type == "histogram"
    ran = {s.labels["kind"] for s in runs.samples if s.labels.get("queue") == "scraped" and s.name.endswith("_count")}
    assert ran == {"k", 'say "hi"\\'}, ran
    outcomes = families["relay_job_outcomes"]
    assert outcomes.type == "counter"
    ended = {
        (s.labels["kind"], s.labels["outcome"]): s.value
        for s in outcomes.samples
        if s.labels.get("queue") == "scraped" and s.name.endswith("_total")
    }
    assert ended == {("k", "succeeded"): 1, ('say "hi"\\', "dead"): 1}, ended
    for name in ("relay_http_request_seconds", "relay_http_long_poll_seconds"):
        h = families[name]
        assert h.type == "histogram", name
        routes = {s.labels["route"] for s in h.samples}
        assert "/v1/lease" in routes, (name, routes)
        for route in routes:
            mine = [s for s in h.samples if s.labels["route"] == route]
            buckets = [s.value for s in mine if s.name.endswith("_bucket")]
            assert buckets == sorted(buckets), (name, route, buckets)
            count = next(s.value for s in mine if s.name.endswith("_count"))
            assert buckets[-1] == count, (name, route)


def test_a_throttled_key_answers_its_job_even_once_finished(client: Client):
    first = client.submit("throttled", "refresh", unique_key="cache", throttle=60)
    assert first.existing is False
    job = client.lease(["throttled"])[0]
    client.ack(job.id, job.token)
    again = client.submit("throttled", "refresh", unique_key="cache", throttle=60)
    assert (again, again.existing) == (first, True)
    plain = client.submit("throttled", "other", unique_key="free")
    job = client.lease(["throttled"])[0]
    client.ack(job.id, job.token)
    assert client.submit("throttled", "other", unique_key="free") != plain, "without a throttle the key is free"
    with pytest.raises(InvalidInput):
        client.submit("throttled", "refresh", throttle=60)


def test_a_debounced_key_replaces_its_job_until_it_starts(client: Client):
    first = client.submit("debounced", "reindex", {"v": 1}, unique_key="doc", debounce=60)
    assert first.existing is False
    again = client.submit("debounced", "reindex", {"v": 2}, unique_key="doc", debounce=60)
    assert (again, again.existing) == (first, True)
    job = client.get(first)
    assert job.payload == {"v": 2}
    assert client.lease(["debounced"]) == [], "its run time is a minute away"
    assert [e["kind"] for e in client.events(first)][-1] == "debounced"
    with pytest.raises(InvalidInput):
        client.submit("debounced", "reindex", debounce=60)
    with pytest.raises(InvalidInput):
        client.submit("debounced", "reindex", unique_key="doc", debounce=60, delay=5)


def test_progress_is_kept_on_the_job(client: Client):
    id = client.submit("progressing", "import")
    job = client.lease(["progressing"])[0]
    assert client.get(id).progress is None
    client.progress(job.id, job.token, 0.25, "page 1 of 4")
    kept = client.get(id).progress
    assert (kept["fraction"], kept["message"], kept["attempt"]) == (0.25, "page 1 of 4", 1)
    with pytest.raises(InvalidInput):
        client.progress(job.id, job.token, 1.5)
    with pytest.raises(LeaseLost):
        client.progress(job.id, job.token + 1, 0.5)
    assert client.get(id).progress == kept, "refused reports change nothing"


def test_lost_leases_are_counted_in_metrics(client: Client):
    from prometheus_client.parser import text_string_to_metric_families

    def lost() -> float:
        families = {f.name: f for f in text_string_to_metric_families(client.metrics())}
        return families["relay_leases_lost"].samples[0].value

    client.submit("lost", "k")
    job = client.lease(["lost"])[0]
    before = lost()
    with pytest.raises(LeaseLost):
        client.ack(job.id, job.token + 1)
    assert lost() == before + 1
    client.ack(job.id, job.token)
    assert lost() == before + 1


def test_events_come_a_page_at_a_time(client: Client):
    """Issue 39, item 4: a job's events are answered a page at a time
    (``limit``, 4 MiB, ``next``); ``events`` follows the pages."""
    id = client.submit("ev", "k")
    for i in range(1050):
        client.append_event(id, "note", {"i": i})
    first = client.events_page(id)
    assert len(first["events"]) == 1000
    assert first["next"] == first["events"][-1]["seq"]
    rest = client.events_page(id, after=first["next"])
    assert [e["seq"] for e in rest["events"]] == list(range(1001, 1052))
    assert rest["next"] is None
    assert [e["seq"] for e in client.events(id)] == list(range(1, 1052))
    assert len(client.events_page(id, limit=10)["events"]) == 10
