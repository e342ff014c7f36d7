"""Durable steps (issue 40) against a real `relay serve`: a handler that
takes a JobContext records each step's output under its lease, and a later
attempt returns the recorded outputs without running their bodies again."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from relay_client import ChildFailed, Client, InvalidState, JobContext, LeaseLost, NotFound, Permanent, Retry, StepBound, Worker


def wait_for(what, predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_retry_skips_the_steps_an_earlier_attempt_recorded(client: Client):
    id = client.submit("q", "order", {"cents": 4200}, max_attempts=3)
    runs: Counter = Counter()
    worker = Worker(client, ["q"], concurrency=2, handle_signals=False, poll_wait=0.5)

    @worker.handler("order")
    def order(job, ctx: JobContext):
        charge = ctx.step("charge", lambda: runs.update(["charge"]) or {"id": ctx.key("charge")})

        def label():
            runs.update(["label"])
            if job.attempt == 1:
                raise Retry("the label printer is off", 0)
            return b"\x80label"

        pdf = ctx.step("label", label)
        ctx.step("email", lambda: runs.update(["email"]))
        return {"charge": charge["id"], "label_bytes": len(pdf)}

    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    wait_for("the order to finish", lambda: client.get(id).state == "SUCCEEDED")
    worker.stop()
    t.join(10)
    job = client.get(id)
    assert job.result == {"charge": f"relay-{id}-charge", "label_bytes": 6}
    assert (runs["charge"], runs["label"], runs["email"]) == (1, 2, 1)
    assert [(s["name"], s["attempt"]) for s in job.steps] == [("charge", 1), ("label", 2), ("email", 2)]
    assert job.steps[0]["output"] == {"id": f"relay-{id}-charge"}
    assert job.steps[1]["output_base64"] == "gGxhYmVs"
    assert job.steps[2]["output"] is None


def test_a_one_argument_handler_still_gets_the_job_alone(client: Client):
    id = client.submit("q", "plain", {"n": 2})
    worker = Worker(client, ["q"], handle_signals=False, poll_wait=0.5)

    @worker.handler("plain")
    def plain(job):
        return job.payload["n"] * 2

    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    wait_for("the job to finish", lambda: client.get(id).state == "SUCCEEDED")
    worker.stop()
    t.join(10)
    assert client.get(id).result == 4


def test_record_step_is_fenced_and_the_first_record_stands(client: Client):
    id = client.submit("q", "fenced", max_attempts=5)
    old = client.lease(["q"], lease_for=0.3)[0]
    assert client.record_step(id, old.token, "charge", {"n": 1}) == (True, {"n": 1})
    assert client.record_step(id, old.token, "charge", {"n": 2}) == (False, {"n": 1})
    time.sleep(0.4)
    new = client.lease(["q"], lease_for=30)[0]
    assert new.steps[0]["name"] == "charge" and new.steps[0]["output"] == {"n": 1}
    with pytest.raises(LeaseLost):
        client.record_step(id, old.token, "email", "old")
    assert client.record_step(id, new.token, "email", b"\x00") == (True, b"\x00")
    assert [s["name"] for s in client.get(id).steps] == ["charge", "email"]
    with pytest.raises(StepBound):
        client.record_step(id, new.token, "big", b"x" * (1 << 20))


def test_a_sleep_frees_the_slot_and_the_job_goes_on_after_it(client: Client):
    sleeper = client.submit("nap", "sleeper")
    order = []
    worker = Worker(client, ["nap"], concurrency=1, handle_signals=False, poll_wait=0.5)

    @worker.handler("sleeper")
    def sleepy(job, ctx: JobContext):
        def before():
            order.append("before")
            client.submit("nap", "other")

        ctx.step("before", before)
        try:
            ctx.sleep("nap", 0.6)
        except Exception:  # a handler's broad except does not swallow the sleep
            order.append("swallowed")
        ctx.step("after", lambda: order.append("after"))

    @worker.handler("other")
    def other(job):
        order.append("other")

    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    wait_for("the sleeper to finish", lambda: client.get(sleeper).state == "SUCCEEDED")
    worker.stop()
    t.join(10)
    assert order == ["before", "other", "after"]
    assert worker.stats.slept == 1
    job = client.get(sleeper)
    assert job.attempts == 1
    assert [s["name"] for s in job.steps] == ["before", "nap", "after"]
    assert isinstance(job.steps[1]["output"]["sleep_until_ms"], int)
    kinds = [e["kind"] for e in client.events(sleeper)]
    assert kinds.count("sleeping") == 1 and kinds.count("leased") == 2


def test_wait_event_goes_on_with_the_payload_or_times_out(client: Client):
    from relay_client import TimedOut

    approved = client.submit("approvals", "approve")
    ignored = client.submit("approvals", "approve")
    asked = []
    worker = Worker(client, ["approvals"], concurrency=2, handle_signals=False, poll_wait=0.5)

    @worker.handler("approve")
    def approve(job, ctx: JobContext):
        ctx.step("ask", lambda: asked.append(job.id))
        timeout = 60 if job.id == approved else 0.3
        try:
            answer = ctx.wait_event("approval", f"approved:{job.id}", timeout)
        except TimedOut:
            return "timed out"
        return f"approved by {answer['by']}"

    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    wait_for("the first job to wait", lambda: client.get(approved).state == "WAITING")
    assert client.emit(f"approved:{approved}", {"by": "ada"}) == {"first": True, "woken": 1}
    assert client.emit(f"approved:{approved}", {"by": "eve"}) == {"first": False, "woken": 0}
    wait_for("both to finish", lambda: all(client.get(i).state == "SUCCEEDED" for i in (approved, ignored)))
    worker.stop()
    t.join(10)
    assert client.get(approved).result == "approved by ada"
    assert client.get(ignored).result == "timed out"
    assert sorted(asked) == sorted([approved, ignored]), "each step ran once"
    assert client.get(approved).attempts == 1


def test_retry_keeps_steps_unless_reset(client: Client):
    id = client.submit("resets", "k", max_attempts=1)

    def fail_with_a_step():
        job = client.lease(["resets"])[0]
        client.record_step(id, job.token, "charge", 1)
        client.nack(id, job.token, "boom")

    fail_with_a_step()
    client.retry(id)
    assert [s["name"] for s in client.get(id).steps] == ["charge"]
    fail_with_a_step()
    client.retry(id, reset_steps=True)
    job = client.get(id)
    assert (job.state, job.steps) == ("READY", [])


def _requests_to(client: Client, route: str) -> int:
    total = 0
    for line in client.metrics().splitlines():
        if line.startswith("relay_http_requests_total{") and f'route="{route}"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def test_a_workers_step_records_ride_on_its_work_calls(client: Client):
    """Item 7: a Worker's step records go with its outcomes in POST
    /v1/work (no call of their own), each handler waiting for its own
    answer; a record after the job was cancelled under it raises in the
    handler and writes nothing."""
    before = _requests_to(client, "/v1/jobs/{id}/steps")
    ids = [client.submit("q", "flow", {"n": n}) for n in range(40)]
    worker = Worker(client, ["q"], concurrency=8, handle_signals=False, poll_wait=0.5)
    cancel_me = client.submit("q", "cancelled", {})
    recorded_a = threading.Event()
    go_on = threading.Event()
    raised = []

    @worker.handler("flow")
    def flow(job, ctx: JobContext):
        a = ctx.step("a", lambda: {"n": job.payload["n"]})
        b = ctx.step("b", lambda: bytes([job.payload["n"]]))
        again = ctx.step("a", lambda: "not run")
        return {"a": a["n"], "b": b[0], "again": again}

    @worker.handler("cancelled")
    def cancelled(job, ctx: JobContext):
        ctx.step("a", lambda: 1)
        recorded_a.set()
        go_on.wait(20)
        try:
            ctx.step("b", lambda: 2)
        except Exception as e:  # noqa: BLE001
            raised.append(e)
            raise

    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    assert recorded_a.wait(30)
    client.cancel(cancel_me)
    go_on.set()
    wait_for("the flows to finish", lambda: all(client.get(i).state == "SUCCEEDED" for i in ids))
    wait_for("the cancelled job's handler to end", lambda: raised)
    worker.stop()
    t.join(10)
    for n, i in enumerate(ids):
        job = client.get(i)
        assert job.result == {"a": n, "b": n, "again": {"n": n}}
        assert [s["name"] for s in job.steps] == ["a", "b"]
    assert isinstance(raised[0], (LeaseLost, InvalidState)), raised
    assert [s["name"] for s in client.get(cancel_me).steps] == ["a"]
    assert _requests_to(client, "/v1/jobs/{id}/steps") == before, "a step record took a call of its own"


def test_result_awaits_the_end_of_a_job(client: Client):
    """Item 5: client.result long-polls the job's end (woken by its ack's
    commit), None when the time runs out first, NotFound for no job."""
    id = client.submit("awaited", "k", {"n": 1})
    lonely = client.submit("nobody", "k")

    def work():
        time.sleep(0.2)
        [job] = client.lease(["awaited"])
        client.ack(job.id, job.token, {"total": 42})

    t = threading.Thread(target=work)
    t.start()
    done = client.result(id, timeout=20)
    t.join()
    assert done is not None and done.state == "SUCCEEDED" and done.result == {"total": 42}
    assert client.result(lonely, timeout=0.2) is None
    with pytest.raises(NotFound):
        client.result(lonely + 1000, timeout=1)


def test_a_handler_spawns_a_child_once_and_joins_it(client: Client):
    """Item 5: ctx.spawn submits once (a step with an idempotency key),
    ctx.join holds no worker while the child runs (one slot: the child
    runs while its parent waits), then returns its result, or raises
    ChildFailed for a child that died."""
    id = client.submit("family", "parent")
    spawned = Counter()
    worker = Worker(client, ["family"], concurrency=1, handle_signals=False, poll_wait=0.5)

    @worker.handler("parent")
    def parent(job, ctx: JobContext):
        def counted_submit(*a, **k):
            spawned.update(["label"])
            return client_submit(*a, **k)

        client_submit = ctx.client.submit
        ctx.client.submit = counted_submit  # type: ignore[method-assign]
        try:
            label = ctx.spawn("label", "family", "child", {"n": 7})
            broken = ctx.spawn("broken", "family", "broken", max_attempts=1)
        finally:
            ctx.client.submit = client_submit  # type: ignore[method-assign]
        printed = ctx.join("label-printed", label)
        try:
            ctx.join("broken-ended", broken)
        except ChildFailed as e:
            return {"label": printed, "broken": [e.state, e.error]}
        return {"label": printed}

    @worker.handler("child")
    def child(job):
        return {"label": f"L-{job.payload['n']}"}

    @worker.handler("broken")
    def broken_child(job):
        raise Permanent("the printer caught fire")

    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    wait_for("the parent to finish", lambda: client.get(id).state in ("SUCCEEDED", "DEAD"))
    worker.stop()
    t.join(10)
    job = client.get(id)
    assert job.state == "SUCCEEDED", job.last_error
    assert job.result["label"] == {"label": "L-7"}
    assert job.result["broken"][0] == "DEAD" and "caught fire" in job.result["broken"][1]
    assert spawned["label"] == 2, "each child submitted once (two children)"
    assert job.attempts == 1, "joins spend no attempt"


def test_a_completion_token_wakes_its_job_once(client: Client):
    """Item 4: ctx.token makes a token once (a step), ctx.wait_token holds
    no worker until its URL is completed by a client without the API
    token; a second completion is TokenUsed."""
    from relay_client import TokenUsed

    id = client.submit("approvals", "approve", {"order": 42})
    urls = []
    worker = Worker(client, ["approvals"], concurrency=2, handle_signals=False, poll_wait=0.5)

    @worker.handler("approve")
    def approve(job, ctx: JobContext):
        token = ctx.token("approval-token", 3600)
        ctx.step("email", lambda: urls.append(token.url))
        decision = ctx.wait_token("approval", token)
        return {"decision": decision, "tokens_made": len(ctx.steps)}

    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    wait_for("the approval email", lambda: urls and client.get(id).state == "WAITING")
    outsider = Client(client.url)  # no API token
    assert outsider.complete_token(urls[0], {"approved_by": "ada"}) == {"completed": True, "woken": 1}
    with pytest.raises(TokenUsed):
        outsider.complete_token(urls[0], {"approved_by": "eve"})
    wait_for("the order to finish", lambda: client.get(id).state == "SUCCEEDED")
    worker.stop()
    t.join(10)
    assert client.get(id).result["decision"] == {"approved_by": "ada"}
    assert len(urls) == 1, "the email went once"


def test_async_handlers_await_their_steps_sleeps_waits_and_children(client: Client):
    """Item 1 ("async and sync where the runtime has both"): an ``async
    def`` handler gets an AsyncJobContext whose steps (a plain or an async
    body), sleeps, event waits, spawns and joins are awaited, on the
    Worker's event loop beside thread-run handlers; its records ride on
    POST /v1/work as the threads' do; a retry skips what was recorded; a
    step raising fails the job as a thread's would."""
    import asyncio

    from relay_client import AsyncJobContext

    before = _requests_to(client, "/v1/jobs/{id}/steps")
    runs: Counter = Counter()
    ids = [client.submit("aq", "order", {"n": n}, max_attempts=3) for n in range(20)]
    plain = client.submit("aq", "plain", {"n": 7})
    worker = Worker(client, ["aq"], concurrency=8, handle_signals=False, poll_wait=0.5)

    @worker.handler("order")
    async def order(job, ctx: AsyncJobContext):
        assert isinstance(ctx, AsyncJobContext)
        n = job.payload["n"]

        async def charge():
            runs.update([("charge", n)])
            await asyncio.sleep(0.001)
            return {"charged": n}

        charged = await ctx.step("charge", charge)
        await ctx.sleep("cool-off", 0.2)
        child = await ctx.spawn("child", "aq", "plain", {"n": n})
        joined = await ctx.join("joined", child)
        event = await ctx.wait_event("approval", f"approved:{job.id}", 60)

        def label():
            runs.update([("label", n)])
            if job.attempt == 1 and n % 2 == 0:
                raise Retry("the printer is off", 0)
            return f"label-{n}"

        printed = await ctx.step("label", label)
        return {"charged": charged["charged"], "joined": joined, "event": event, "label": printed}

    @worker.handler("plain")
    def plain_handler(job):  # a thread-run handler beside the async ones
        return job.payload["n"] * 2

    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    wait_for("every order to wait for its approval", lambda: all(client.get(i).state == "WAITING" and client.get(i).steps and client.get(i).steps[-1]["name"] == "joined" for i in ids), 60)
    for i in ids:
        client.emit(f"approved:{i}", {"by": "ada"})
    wait_for("the orders to finish", lambda: all(client.get(i).state == "SUCCEEDED" for i in ids), 60)
    worker.stop()
    t.join(10)
    assert not t.is_alive()
    assert client.get(plain).result == 14
    for n, i in enumerate(ids):
        job = client.get(i)
        assert job.result == {"charged": n, "joined": n * 2, "event": {"by": "ada"}, "label": f"label-{n}"}
        assert [s["name"] for s in job.steps] == ["charge", "cool-off", "child", "joined", "approval", "label"]
        assert runs[("charge", n)] == 1, "a recorded step is not run again"
        assert runs[("label", n)] == (2 if n % 2 == 0 else 1)
    assert _requests_to(client, "/v1/jobs/{id}/steps") == before, "a step record took a call of its own"


def test_an_async_handler_waits_for_its_completion_token(client: Client):
    """An ``async def`` handler makes a completion token once and awaits
    it; completed from outside, it goes on with the payload."""
    from relay_client import AsyncJobContext

    id = client.submit("atok", "approve")
    made = []
    worker = Worker(client, ["atok"], handle_signals=False, poll_wait=0.5)

    @worker.handler("approve")
    async def approve(job, ctx: AsyncJobContext):
        token = await ctx.token("token", 600)
        made.append(token)
        return await ctx.wait_token("approval", token)

    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    wait_for("the job to wait for its token", lambda: client.get(id).state == "WAITING")
    assert client.complete_token(made[0].token, {"ok": True})["completed"] is True
    wait_for("the job to finish", lambda: client.get(id).state == "SUCCEEDED")
    worker.stop()
    t.join(10)
    assert client.get(id).result == {"ok": True}
    assert len({tok.id for tok in made}) == 1, "one token, made once"
