"""A worker: runs handlers by job kind on a pool of threads, over Relay's HTTP API.

- ``concurrency`` handler threads, started once, take leased jobs from a
  queue. A handler that returns acks the job (its return value is the
  result); one that raises nacks it with the exception and its traceback
  as the error (:class:`Retry` sets the delay, :class:`Permanent` makes it
  DEAD at once, :class:`Snooze` puts it back for later without spending an
  attempt).
- One loop (the thread that calls :meth:`Worker.run`) does all the
  bookkeeping and the talking. Outcomes that finish close together (within
  a few milliseconds, or at once when no other handler runs) go to the
  server in one ``POST /v1/work``, which also leases jobs for the free
  slots: one call and one commit for a whole batch. A job's outcome counts
  in :attr:`Worker.stats` once the server has answered it.
- With nothing to report and slots free, a poller thread long-polls on a
  connection of its own, so an outcome is never held back behind it.
- One heartbeat extends every lease held in one ``POST /v1/heartbeat``, at a
  third of the shortest lease. A lease answered lost drops that job's
  outcome when its handler ends (another worker may hold the job).
- SIGTERM or SIGINT (or :meth:`Worker.stop`) stops leasing, lets running
  handlers finish for ``grace`` seconds, reports their outcomes and
  releases the jobs still running after that, so another worker takes them
  at once.
- A server that cannot be reached (or fails a whole call) is retried with
  back-off (up to 30 s), said once per outage on stderr; outcomes are kept
  and sent again (a repeated ack is answered Ok). The worker does not crash.
- An outcome the server refuses for good (a result over its size limit) is
  replaced by a nack carrying the refusal, so the job's attempt counts and
  its error says why.
- A token the server refuses (401 or 403) stops the worker: :meth:`Worker.run`
  says so on stderr and raises :class:`~relay_client.errors.Unauthorized`
  or :class:`~relay_client.errors.Forbidden` (retrying would never succeed).
"""

from __future__ import annotations

import math
import numbers
import os
import queue
import re
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

import asyncio
import base64
import inspect
import random
import secrets
import socket
from datetime import datetime, timezone

from .client import Client, LeasedJob, LeaseExtension, LeaseRequest, Outcome, OutcomeAnswer, Payload, WorkAnswer
from .errors import (
    Busy,
    Forbidden,
    InvalidInput,
    InvalidRequest,
    MaybeApplied,
    PayloadTooLarge,
    RelayError,
    Timeout,
    Unauthorized,
    Unavailable,
)

Handler = Callable[..., Any]

# How long a finished job's outcome waits for others finishing close behind
# it, so that they share a call and a commit. Not waited when no other
# handler is running.
COALESCE = 0.002
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
LEASE_MAX = 1000  # the most jobs one lease request may ask for
# Reports in flight at once, each from its own thread and connection, so
# that outcomes finishing while one report is on the server go out without
# waiting for its answer (the server may commit both in one fsync).
SENDERS = 2
MIN_SHARE = 16
# The longest error text of a nack the worker makes for an outcome the
# server refused (so that the nack itself is not refused for its size).
REFUSAL_MAX = 8 * 1024


def _delay(delay: Any) -> float:
    """``delay`` checked: a number of seconds, finite and not negative."""
    if isinstance(delay, bool) or not isinstance(delay, numbers.Real):
        raise TypeError(f"a delay is a number of seconds, not {type(delay).__name__}")
    if not math.isfinite(delay) or delay < 0:
        raise ValueError(f"a delay is a finite number of seconds, at least 0, not {delay}")
    return delay  # type: ignore[return-value]


def _cut(text: str, limit: int = REFUSAL_MAX) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8."""
    raw = text.encode("utf-8", "replace")
    return text if len(raw) <= limit else raw[:limit].decode("utf-8", "ignore")


def _describe(e: BaseException) -> str:
    """``Type: message`` of an exception whose ``__str__`` may itself raise."""
    try:
        return f"{type(e).__name__}: {e}"
    except Exception:  # noqa: BLE001
        return f"{type(e).__name__} (its message cannot be shown)"


class Retry(Exception):
    """Raise from a handler to fail the attempt and retry after ``delay`` seconds."""

    def __init__(self, message: str, delay: float):
        super().__init__(message)
        self.delay = _delay(delay)


class Permanent(Exception):
    """Raise from a handler to fail the job for good (DEAD, no more attempts)."""


class Snooze(Exception):
    """Raise from a handler to put the job back for ``delay`` seconds without
    counting the attempt (not a failure: "not yet")."""

    def __init__(self, delay: float):
        super().__init__(f"snoozed for {delay} s")
        self.delay = _delay(delay)


class JobContext:
    """What a handler that takes a second argument gets beside its job: its
    durable steps.

    >>> @worker.handler("order")  # doctest: +SKIP
    ... def order(job, ctx):
    ...     charge = ctx.step("charge", lambda: pay(job.payload, key=ctx.key("charge")))
    ...     ctx.step("email", lambda: send_receipt(charge))
    """

    def __init__(
        self,
        client: Client,
        job: LeasedJob,
        record: Optional[Callable[[LeasedJob, str, Payload], Tuple[bool, Payload]]] = None,
    ):
        self.client = client
        self.job = job
        # A Worker's: records go with its outcomes in POST /v1/work.
        self._record = record
        self._steps: Dict[str, Payload] = {}
        for s in job.steps or ():
            self._steps[s["name"]] = _step_output(s)

    def step(self, name: str, fn: Callable[[], Payload]) -> Payload:
        """Runs step ``name`` of the job once, whatever happens to the
        worker: when an earlier run of the job recorded it, returns the
        recorded output without calling ``fn``; otherwise calls ``fn``,
        records what it returns under the job's lease (a JSON value, or
        ``bytes``; on disk before this returns) and returns it.

        Code outside steps runs again on every attempt; a step's ``fn`` runs
        again only when its worker died (or lost its lease) between its end
        and the record: give a side effect an idempotency key
        (:meth:`key`). An ``fn`` that raises records nothing; the next
        attempt runs it again.

        Raises :class:`~relay_client.errors.LeaseLost` when the lease is
        lost (this run's outcome will be refused; the job's next holder goes
        on), :class:`~relay_client.errors.StepBound` past the job's 1,000
        steps or 1 MiB of output."""
        if name in self._steps:
            return self._steps[name]
        value = fn()
        if self._record is not None:
            recorded, standing = self._record(self.job, name, value)
            if not recorded:
                value = standing
            self._steps[name] = value
            return value
        pause = 0.05
        while True:
            try:
                recorded, standing = self.client.record_step(self.job.id, self.job.token, name, value)
                break
            except (Unavailable, Busy, Timeout, MaybeApplied):
                # The server cannot be reached or answer now: a record is
                # safe to send again (the first of a name stands).
                if time.monotonic() >= self._give_up():
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
        if not recorded:
            value = standing
        self._steps[name] = value
        return value

    def sleep(self, name: str, seconds: float) -> None:
        """Sleeps for ``seconds`` without holding a worker: raises
        :class:`Sleep`, which the worker records as the job's outcome (the
        job gives its lease back and is WAITING until then, when it is
        leased again and its handler runs from the start, passing its
        recorded steps and this sleep at once). The sleep is recorded as
        step ``name``, with the time it wakes: a run before that time
        sleeps until it, one after it goes on. No attempt is spent."""
        self.sleep_until(name, time.time() + seconds)

    def sleep_until(self, name: str, when: Union[float, datetime]) -> None:
        """:meth:`sleep` until ``when`` (a ``datetime``, or seconds since
        the epoch)."""
        t = when.timestamp() if isinstance(when, datetime) else float(when)
        until_ms = int(round(t * 1000))
        if name in self._steps:
            recorded = self._steps[name]
            if not (isinstance(recorded, dict) and isinstance(recorded.get("sleep_until_ms"), int)):
                raise Permanent(f"step {name!r} is recorded and is not a sleep; name the sleep anew")
            until_ms = recorded["sleep_until_ms"]
        if until_ms <= time.time() * 1000:
            return
        raise Sleep(name, until_ms)

    def wait_event(self, name: str, key: str, timeout: float) -> Payload:
        """Waits for event ``key`` (``client.emit``, ``relay emit``) for at
        most ``timeout`` seconds without holding a worker; returns its
        payload once it is emitted (at once when it was emitted already, in
        the last 7 days), or raises :class:`TimedOut` when the time ran out
        first. Recorded as step ``name``: a later run gets the same answer.

        While the event has not come it raises :class:`Wait`, which the
        worker records as the job's outcome: the job gives its lease back
        and is WAITING until an emit of the key (READY in the emit's own
        commit) or the timeout, then its handler runs from the start,
        passing its recorded steps and this wait."""
        if name in self._steps:
            recorded = self._steps[name]
            if isinstance(recorded, dict) and len(recorded) == 1:
                if recorded.get("timed_out") is True:
                    raise TimedOut(f"no event {key!r} came in time (step {name!r})")
                if "event" in recorded:
                    return recorded["event"]
                if isinstance(recorded.get("event_base64"), str):
                    return base64.b64decode(recorded["event_base64"])
            raise Permanent(f"step {name!r} is recorded and is not a wait for an event; name the wait anew")
        raise Wait(name, key, int(round((time.time() + timeout) * 1000)))

    def token(self, name: str, timeout: float) -> "Token":
        """Makes a completion token once, as step ``name``, open for
        ``timeout`` seconds: a human or a third party completes it once,
        without an API token, by POSTing a JSON payload to its ``url``
        (:meth:`Client.complete_token`). Put the URL in an approval email or
        hand it to a vendor's webhook, then :meth:`wait_token`. Every later
        run gets the same token."""
        return self._token_of(name, self.step(name, lambda: self.client.create_token(self.job.id, self.job.token, timeout)))

    def _token_of(self, name: str, rec: Payload) -> "Token":
        """The token step ``name`` recorded."""
        if not (isinstance(rec, dict) and isinstance(rec.get("token"), str)):
            raise Permanent(f"step {name!r} is recorded and is not a token; name the token anew")
        return Token(rec["id"], rec["token"], self.client.url + rec["path"], rec["key"], rec["expires_at"])

    def wait_token(self, name: str, token: "Token") -> Payload:
        """Waits for ``token`` to be completed, as :meth:`wait_event` waits
        for an event: returns the payload it was completed with, or raises
        :class:`TimedOut` once it expired. Recorded as step ``name``."""
        return self.wait_event(name, token.key, _left(token))

    def spawn(self, name: str, queue: str, kind: str, payload: Payload = None, **options: Any) -> int:
        """Submits a child job once, as step ``name``: its submit carries the
        step's idempotency key (:meth:`key`), so a run again after a crash
        between the submit and its record finds the same job. Returns the
        child's id (recorded: every later run gets it back). ``options``
        are :meth:`Client.submit`'s. Await it with :meth:`join`."""
        return int(self.step(name, self._submitter(name, queue, kind, payload, options)))

    def _submitter(self, name: str, queue: str, kind: str, payload: Payload, options: Dict[str, Any]) -> Callable[[], int]:
        """The submit of child ``name``, under the step's idempotency key."""
        key = self.key(name)
        return lambda: int(self.client.submit(queue, kind, payload, idempotency_key=key, **options))

    def join(self, name: str, child: int) -> Payload:
        """Awaits job ``child``'s end without holding a worker: returns its
        result once it SUCCEEDED, raises :class:`ChildFailed` (its
        ``state``, its ``error``) when it ended DEAD or CANCELLED or was
        deleted. Recorded as step ``name``: a later run gets the same
        answer.

        While the child runs it raises :class:`Join`, which the worker
        records as the job's outcome: the job gives its lease back and is
        WAITING until the child ends, then its handler runs from the start,
        passing its recorded steps and this join."""
        if name in self._steps:
            recorded = self._steps[name]
            if not (isinstance(recorded, dict) and isinstance(recorded.get("joined"), int) and "state" in recorded):
                raise Permanent(f"step {name!r} is recorded and is not a join; name the join anew")
            if recorded["state"] == "SUCCEEDED":
                if "result_base64" in recorded:
                    return base64.b64decode(recorded["result_base64"])
                return recorded.get("result")
            raise ChildFailed(recorded["joined"], recorded["state"], recorded.get("error"))
        raise Join(name, child)

    def key(self, name: str) -> str:
        """An idempotency key for the side effect of step ``name``: the same
        on every attempt of this job, different for every other job and step
        (``relay-<job id>-<name>``)."""
        return f"relay-{self.job.id}-{name}"

    @property
    def steps(self) -> Dict[str, Payload]:
        """The outputs recorded so far, by step name."""
        return dict(self._steps)

    def _give_up(self) -> float:
        # Past the lease it was leased for, another worker may hold the job.
        if not hasattr(self, "_deadline"):
            self._deadline = time.monotonic() + self.job.lease_for_ms / 1000
        return self._deadline


class AsyncJobContext(JobContext):
    """The :class:`JobContext` of an ``async def`` handler: the same steps,
    sleeps, waits, tokens and joins, each awaited.

    >>> @worker.handler("order")  # doctest: +SKIP
    ... async def order(job, ctx):
    ...     charge = await ctx.step("charge", lambda: pay(job.payload, key=ctx.key("charge")))
    ...     await ctx.sleep("cool-off", 3600)
    ...     await ctx.step("email", send_receipt_async)  # an async fn is awaited

    The Worker runs every ``async def`` handler on one asyncio event loop
    of its own (one thread), where a step's record answered wakes its
    handler without a thread switch; the ``concurrency`` slots are shared
    with the thread-run handlers. A handler must not block that loop:
    blocking calls belong in ``await asyncio.to_thread(...)``."""

    def __init__(
        self,
        client: Client,
        job: LeasedJob,
        record: Callable[[LeasedJob, str, Payload], Any],
    ):
        super().__init__(client, job)
        self._arecord = record

    async def step(self, name: str, fn: Callable[[], Any]) -> Payload:  # type: ignore[override]
        """:meth:`JobContext.step`, awaited: ``fn`` may be a plain function
        or return an awaitable (an ``async def`` function), which is
        awaited before its output is recorded."""
        if name in self._steps:
            return self._steps[name]
        value = fn()
        if inspect.isawaitable(value):
            value = await value
        recorded, standing = await self._arecord(self.job, name, value)
        if not recorded:
            value = standing
        self._steps[name] = value
        return value

    # (JobContext's own methods called by name: its sleep and wait_token
    # call sleep_until and wait_event, which are coroutines here.)
    async def sleep(self, name: str, seconds: float) -> None:  # type: ignore[override]
        """:meth:`JobContext.sleep`, awaited."""
        JobContext.sleep_until(self, name, time.time() + seconds)

    async def sleep_until(self, name: str, when: Union[float, datetime]) -> None:  # type: ignore[override]
        """:meth:`JobContext.sleep_until`, awaited."""
        JobContext.sleep_until(self, name, when)

    async def wait_event(self, name: str, key: str, timeout: float) -> Payload:  # type: ignore[override]
        """:meth:`JobContext.wait_event`, awaited."""
        return JobContext.wait_event(self, name, key, timeout)

    async def token(self, name: str, timeout: float) -> "Token":  # type: ignore[override]
        """:meth:`JobContext.token`, awaited (the token is made on a thread:
        the loop goes on meanwhile)."""
        rec = await self.step(
            name, lambda: asyncio.to_thread(self.client.create_token, self.job.id, self.job.token, timeout)
        )
        return self._token_of(name, rec)

    async def wait_token(self, name: str, token: "Token") -> Payload:  # type: ignore[override]
        """:meth:`JobContext.wait_token`, awaited."""
        return JobContext.wait_event(self, name, token.key, _left(token))

    async def spawn(self, name: str, queue: str, kind: str, payload: Payload = None, **options: Any) -> int:  # type: ignore[override]
        """:meth:`JobContext.spawn`, awaited (the submit is made on a thread)."""
        submit = self._submitter(name, queue, kind, payload, options)
        return int(await self.step(name, lambda: asyncio.to_thread(submit)))

    async def join(self, name: str, child: int) -> Payload:  # type: ignore[override]
        """:meth:`JobContext.join`, awaited."""
        return JobContext.join(self, name, child)


def _left(token: "Token") -> float:
    """Seconds until ``token`` expires (0 once it has)."""
    return max(0.0, datetime.fromisoformat(token.expires_at.replace("Z", "+00:00")).timestamp() - time.time())


def _step_output(step: Dict[str, Any]) -> Payload:
    if "output_base64" in step:
        return base64.b64decode(step["output_base64"])
    return step.get("output")


def _arity(f: Handler) -> int:
    """How many positional arguments ``f`` takes (1: the job; 2: the job
    and its :class:`JobContext`)."""
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
        return 2
    return 2 if sum(1 for p in params if p.kind in kinds) >= 2 else 1


class Sleep(BaseException):
    """Raised by :meth:`JobContext.sleep` to put the job to sleep: let it
    through (it derives from ``BaseException``, so ``except Exception`` does
    not catch it); the worker records the sleep as the job's outcome."""

    def __init__(self, step: str, until_ms: int):
        super().__init__(f"asleep until {_rfc3339(until_ms)}")
        self.step = step
        self.until_ms = until_ms


@dataclass(frozen=True)
class Token:
    """A completion token (:meth:`JobContext.token`): ``url`` completes it
    (``POST`` a JSON payload; no API token needed); ``token`` is its
    ``<id>.<secret>``; ``key`` the event its completion emits."""

    id: str
    token: str
    url: str
    key: str
    expires_at: str


class Join(BaseException):
    """Raised by :meth:`JobContext.join` while the joined job runs; the
    worker records it as the job's outcome (a BaseException, so that an
    ``except Exception`` in the handler does not swallow it)."""

    def __init__(self, step: str, child: int):
        super().__init__(f"awaiting job {child}")
        self.step = step
        self.child = child


class ChildFailed(Exception):
    """A joined job ended without succeeding: ``state`` is DEAD, CANCELLED
    or DELETED, ``error`` its last error."""

    def __init__(self, job: int, state: str, error: Optional[str]):
        super().__init__(f"job {job} ended {state}" + (f": {error}" if error else ""))
        self.job = job
        self.state = state
        self.error = error


class TimedOut(Exception):
    """What :meth:`JobContext.wait_event` raises when its event did not
    come in time: catch it to act on the timeout (uncaught, it fails the
    attempt like any exception)."""


class Wait(BaseException):
    """Raised by :meth:`JobContext.wait_event` while its event has not
    come: let it through (a ``BaseException``, as :class:`Sleep`); the
    worker records the wait as the job's outcome."""

    def __init__(self, step: str, key: str, until_ms: int):
        super().__init__(f"waiting for event {key!r} until {_rfc3339(until_ms)}")
        self.step = step
        self.key = key
        self.until_ms = until_ms


def _rfc3339(ms: int) -> str:
    t = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@dataclass
class Stats:
    succeeded: int = 0
    failed: int = 0
    snoozed: int = 0
    slept: int = 0
    released: int = 0
    lost: int = 0


class _StepRecord:
    """A step record a handler thread waits on: the loop sends it with the
    outcomes (``POST /v1/work``) and releases ``done`` once it is answered
    (a lock taken at birth: the cheapest wait there is, no Condition)."""

    __slots__ = ("done", "error", "earlier", "wake")

    def __init__(self, wake: Optional[Callable[[], None]] = None) -> None:
        self.done = threading.Lock()
        self.done.acquire()
        self.error: Optional[BaseException] = None
        self.earlier: Optional[Dict[str, Any]] = None
        #: An async handler's: wakes it on its event loop, once answered.
        self.wake = wake


# A job whose handler ended, with what to report and the stat it counts in;
# or a step record of a running job, with its waiter.
Done = Tuple[LeasedJob, Outcome, Union[str, _StepRecord]]
# What the loop's inbox carries: ("done", job, outcome, stat) from a handler
# thread, ("step", job, outcome, record) from a handler's JobContext.step,
# ("answered", call, answer or the exception) from a sender or the poller,
# ("stop",) from stop().
Message = Tuple[Any, ...]


class Worker:
    """Runs the handlers registered with :meth:`handler` for jobs of ``queues``.

    >>> worker = Worker(Client("http://127.0.0.1:7433", token="secret"), ["emails"])  # doctest: +SKIP
    >>> @worker.handler("send")  # doctest: +SKIP
    ... def send(job):
    ...     deliver(job.payload["to"])
    >>> worker.run()  # doctest: +SKIP
    """

    def __init__(
        self,
        client: Client,
        queues: Sequence[str],
        *,
        concurrency: int = 8,
        lease_for: float = 30.0,
        grace: float = 10.0,
        name: Optional[str] = None,
        poll_wait: float = 5.0,
        handle_signals: bool = True,
        beat_every: float = 5.0,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self.queues = list(queues)
        self.concurrency = concurrency
        self.lease_for = lease_for
        self.grace = grace
        self.name = name or f"py-{os.uname().nodename}-{os.getpid()}"
        self.poll_wait = poll_wait
        self.handle_signals = handle_signals
        if not 0.1 <= beat_every <= 600:
            raise ValueError("beat_every must be 0.1-600 seconds")
        #: How often the worker tells the server it is alive and what it
        #: runs (``relay workers``, ``GET /v1/workers``).
        self.beat_every = beat_every
        self.id = re.sub(r"[^A-Za-z0-9_.-]", "_", self.name[:48]) + f"-{random.getrandbits(32):08x}"
        self.stats = Stats()
        self._handlers: Dict[str, Handler] = {}
        # Kinds whose handler takes a JobContext too.
        self._with_context: Dict[str, bool] = {}
        # Kinds whose handler is an `async def`: run on the worker's event
        # loop (self._aloop, a thread of its own while run() runs).
        self._async: Dict[str, bool] = {}
        self._aloop: Optional[asyncio.AbstractEventLoop] = None
        # SimpleQueue: put() may be called from a signal handler (stop()).
        self._inbox: "queue.SimpleQueue[Message]" = queue.SimpleQueue()
        self._jobs: "queue.SimpleQueue[Optional[LeasedJob]]" = queue.SimpleQueue()
        self._polls: "queue.SimpleQueue[Optional[_Call]]" = queue.SimpleQueue()
        self._calls: "queue.SimpleQueue[Optional[_Call]]" = queue.SimpleQueue()
        self._stopping = False
        # Once the loop has sent its last call, a step record is refused
        # at once instead of waiting for a loop that is gone.
        self._closing = threading.Lock()
        self._closed = False

    def handler(self, kind: str) -> Callable[[Handler], Handler]:
        """Registers the decorated function for jobs of ``kind``: it takes the
        job, or the job and its :class:`JobContext` (durable steps). An
        ``async def`` handler runs on the worker's event loop and gets an
        :class:`AsyncJobContext`."""

        def register(f: Handler) -> Handler:
            self._handlers[kind] = f
            self._with_context[kind] = _arity(f) >= 2
            self._async[kind] = inspect.iscoroutinefunction(f)
            return f

        return register

    def stop(self) -> None:
        """Stops leasing; :meth:`run` returns once running jobs are settled.
        Safe from any thread and from a signal handler."""
        self._stopping = True
        self._inbox.put(("stop",))

    def run(self) -> Stats:
        """Leases and runs jobs until stopped; returns what happened.

        Raises :class:`~relay_client.errors.Unauthorized` or
        :class:`~relay_client.errors.Forbidden` when the server refuses the
        token (said on stderr too): the worker stops at once, its jobs'
        leases expire (they cannot be reported without a valid token)."""
        previous = self._install_signals()
        threads = [threading.Thread(target=self._serve, args=(self._polls,), name="relay-poller", daemon=True)]
        threads += [
            threading.Thread(target=self._serve, args=(self._calls,), name=f"relay-sender-{i}", daemon=True)
            for i in range(SENDERS)
        ]
        threads += [
            threading.Thread(target=self._handler_loop, name=f"relay-handler-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        runner: Optional[threading.Thread] = None
        if any(self._async.values()):
            self._aloop = asyncio.new_event_loop()
            runner = threading.Thread(target=self._aloop.run_forever, name="relay-async", daemon=True)
            runner.start()
        loop = _Loop(self)
        presence = _Presence(self, loop)
        beating = threading.Thread(target=presence.run, name="relay-presence", daemon=True)
        threads.append(beating)
        for t in threads:
            t.start()
        try:
            loop.run()
        finally:
            presence.stop(beating, told=loop.fatal is None)
            # Idle threads end; one still in a handler after the grace ends
            # when the handler returns (its job was released).
            for calls, n in ((self._polls, 1), (self._calls, SENDERS)):
                for _ in range(n):
                    calls.put(None)
            for _ in range(self.concurrency):
                self._jobs.put(None)
            if self._aloop is not None and runner is not None:
                # Handlers still running after the grace were released:
                # they are cancelled, and the loop ends.
                aloop = self._aloop
                aloop.call_soon_threadsafe(_cancel_all_and_stop, aloop)
                runner.join(self.client.timeout)
                if not runner.is_alive():
                    aloop.close()
                self._aloop = None
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if loop.fatal is not None:
            raise loop.fatal
        return self.stats

    def _install_signals(self) -> Dict[int, Any]:
        if not (self.handle_signals and threading.current_thread() is threading.main_thread()):
            return {}
        previous: Dict[int, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: self.stop())
        return previous

    # -- the threads besides the loop --------------------------------------

    def _handler_loop(self) -> None:
        take, tell, run = self._jobs.get, self._inbox.put, self._outcome_of
        while True:
            job = take()
            if job is None:
                return
            try:
                outcome, stat = run(job)
            except BaseException as e:  # noqa: BLE001 - this thread never dies: its slot would be lost
                # Even SystemExit or KeyboardInterrupt: raised in a handler
                # thread they would only end this thread (they do not stop
                # the process); the job is failed and the thread goes on.
                outcome, stat = self._failure(job, e), "failed"
            tell(("done", job, outcome, stat))

    @staticmethod
    def _failure(job: LeasedJob, e: BaseException) -> Outcome:
        """A nack for a job whose outcome could not be made."""
        try:
            return Outcome.nack(job.id, job.token, _cut(f"{_describe(e)}\n{traceback.format_exc()}", 64 * 1024))
        except BaseException:  # noqa: BLE001
            return Outcome.nack(job.id, job.token, f"the job's outcome could not be made ({type(e).__name__})")

    def _serve(self, calls: "queue.SimpleQueue[Optional[_Call]]") -> None:
        """Makes the calls the loop asks for, on this thread's connection,
        and hands the answers (or the exceptions) back to the loop."""
        while True:
            call = calls.get()
            if call is None:
                return
            answer: Any
            try:
                answer = call.send(self.client)
            except Exception as e:  # noqa: BLE001 - the loop decides what a failed call means
                answer = e
            self._inbox.put(("answered", call, answer))

    def _outcome_of(self, job: LeasedJob) -> Tuple[Outcome, str]:
        """Runs the job's handler; returns what to report and the stat it counts in."""
        handler = self._handlers.get(job.kind)
        if handler is None:
            return self._unhandled(job)
        try:
            if self._with_context.get(job.kind):
                result = handler(job, JobContext(self.client, job, self._record_step))
            else:
                result = handler(job)
        except BaseException as e:  # noqa: BLE001 - a handler thread never dies: its slot would be lost
            return self._raised(job, e)
        return self._succeeded(job, result)

    async def _run_async(self, job: LeasedJob) -> None:
        """Runs an ``async def`` handler on the worker's event loop and hands
        its outcome to the loop, as a handler thread does."""
        try:
            outcome, stat = await self._async_outcome_of(job)
        except asyncio.CancelledError:
            return  # released at the grace's end: nothing more to say
        except BaseException as e:  # noqa: BLE001 - the outcome must reach the loop
            outcome, stat = self._failure(job, e), "failed"
        self._inbox.put(("done", job, outcome, stat))

    async def _async_outcome_of(self, job: LeasedJob) -> Tuple[Outcome, str]:
        handler = self._handlers.get(job.kind)
        if handler is None:
            return self._unhandled(job)
        try:
            if self._with_context.get(job.kind):
                result = await handler(job, AsyncJobContext(self.client, job, self._record_step_async))
            else:
                result = await handler(job)
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001
            return self._raised(job, e)
        return self._succeeded(job, result)

    def _unhandled(self, job: LeasedJob) -> Tuple[Outcome, str]:
        error = f"no handler for kind {job.kind!r} on this worker (queues: {', '.join(self.queues)})"
        return Outcome.nack(job.id, job.token, error, permanent=True), "failed"

    @staticmethod
    def _raised(job: LeasedJob, e: BaseException) -> Tuple[Outcome, str]:
        """What a handler that raised ``e`` reports (called in its except
        clause: the traceback is the one being handled)."""
        id, token = job.id, job.token
        if isinstance(e, Snooze):
            return Outcome.release(id, token, in_=e.delay), "snoozed"
        if isinstance(e, Sleep):
            return Outcome.sleep(id, token, e.step, _rfc3339(e.until_ms)), "slept"
        if isinstance(e, Wait):
            return Outcome.wait(id, token, e.step, e.key, _rfc3339(e.until_ms)), "slept"
        if isinstance(e, Join):
            return Outcome.join(id, token, e.step, e.child), "slept"
        if isinstance(e, Retry):
            return Outcome.nack(id, token, f"{e}\n{traceback.format_exc()}", retry_in=e.delay), "failed"
        if isinstance(e, Permanent):
            return Outcome.nack(id, token, f"{e}\n{traceback.format_exc()}", permanent=True), "failed"
        return Outcome.nack(id, token, f"{_describe(e)}\n{traceback.format_exc()}"), "failed"

    @staticmethod
    def _succeeded(job: LeasedJob, result: Any) -> Tuple[Outcome, str]:
        try:
            return Outcome.ack(job.id, job.token, result), "succeeded"
        except (TypeError, ValueError, RecursionError) as e:
            error = f"the handler's result cannot be sent ({type(e).__name__}: {e}); return a JSON value or bytes"
            return Outcome.nack(job.id, job.token, error), "failed"

    async def _record_step_async(self, job: LeasedJob, name: str, value: Payload) -> Tuple[bool, Payload]:
        """:meth:`_record_step` for an ``async def`` handler: awaits the
        answer on the event loop instead of blocking a thread."""
        aloop = asyncio.get_running_loop()
        answered = aloop.create_future()

        def wake() -> None:  # on the worker loop's thread
            try:
                aloop.call_soon_threadsafe(_resolve, answered)
            except RuntimeError:
                pass  # the event loop is closed: nobody waits any more

        outcome = Outcome.step(job.id, job.token, name, value)
        record = _StepRecord(wake)
        with self._closing:
            if self._closed:
                raise Unavailable(f"job {job.id}: the worker stopped before step {name!r} was recorded")
            self._inbox.put(("step", job, outcome, record))
        await answered
        if record.error is not None:
            raise record.error
        if record.earlier is not None:
            return False, _step_output(record.earlier)
        return True, value

    def _record_step(self, job: LeasedJob, name: str, value: Payload) -> Tuple[bool, Payload]:
        """Records step ``name`` of ``job`` through the loop, with the other
        outcomes of one ``POST /v1/work`` (one round trip, a shared commit),
        and waits for its answer: ``(True, value)``, or ``(False, earlier)``
        when a record of the name stood; raises the error it was answered
        (:class:`~relay_client.errors.LeaseLost`, ``StepBound``...). An
        outage is waited out, the lease kept by the heartbeats."""
        outcome = Outcome.step(job.id, job.token, name, value)
        record = _StepRecord()
        with self._closing:
            if self._closed:
                raise Unavailable(f"job {job.id}: the worker stopped before step {name!r} was recorded")
            self._inbox.put(("step", job, outcome, record))
        record.done.acquire()
        if record.error is not None:
            raise record.error
        if record.earlier is not None:
            return False, _step_output(record.earlier)
        return True, value


def _resolve(answered: "asyncio.Future[None]") -> None:
    if not answered.done():
        answered.set_result(None)


def _cancel_all_and_stop(aloop: asyncio.AbstractEventLoop) -> None:
    """On the event loop: cancels the handlers still running (their jobs
    were released) and stops the loop once they have seen it."""
    tasks = [t for t in asyncio.all_tasks(aloop) if not t.done()]
    for t in tasks:
        t.cancel()
    if not tasks:
        aloop.stop()
        return
    asyncio.gather(*tasks, return_exceptions=True).add_done_callback(lambda _: aloop.stop())


class _Call:
    """A call the loop hands to a sender thread (or the poller)."""

    __slots__ = ("kind", "batch", "lease", "jobs", "sent_at")

    def __init__(
        self,
        kind: str,
        batch: Optional[List[Done]] = None,
        lease: Optional[LeaseRequest] = None,
        jobs: Optional[List[LeasedJob]] = None,
    ):
        self.kind = kind  # "report", "alone" (one outcome, no lease), "poll" or "beat"
        self.batch = batch or []
        self.lease = lease
        self.jobs = jobs or []
        self.sent_at = time.monotonic()

    @property
    def slots(self) -> int:
        return self.lease.max if self.lease is not None else 0

    def send(self, client: Client) -> Any:
        if self.kind == "beat":
            return client.heartbeat([(j.id, j.token, j.lease_for_ms / 1000.0) for j in self.jobs])
        return client.work([o for _, o, _ in self.batch], self.lease)


_REFUSED = (InvalidRequest, InvalidInput, PayloadTooLarge)  # a call the server would refuse again
_FATAL = (Unauthorized, Forbidden)  # the token is refused: retrying cannot succeed


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Presence:
    """Tells the server, every ``beat_every``, that the worker is alive and
    what it runs (``PUT /v1/workers/{id}``); its last says it stopped. It
    reads the loop's jobs from its own thread: a copy of a dict, which
    CPython makes whole."""

    def __init__(self, worker: Worker, loop: "_Loop"):
        self.w = worker
        self.loop = loop
        self.stopping = threading.Event()
        self.beat: Dict[str, Any] = {
            "name": worker.name[:64],
            "host": socket.gethostname()[:255],
            "pid": os.getpid(),
            "queues": worker.queues,
            "concurrency": worker.concurrency,
            "version": "relay-python 0.1.0",
            "started_at": _now(),
            "beat_every_ms": int(worker.beat_every * 1000),
        }
        #: This worker's secret, sent with every heartbeat from the first:
        #: no other client can write its record, and a first heartbeat
        #: whose answer was lost is simply sent again.
        self.secret: str = secrets.token_hex(32)

    def send(self, stopped: bool) -> None:
        held = dict(self.loop.held)
        started = dict(self.loop.started)
        running = [] if stopped else [
            {"id": job.id, "token": job.token, "since": started.get(job.id) or _now()} for job in held.values()
        ]
        running.sort(key=lambda r: r["id"])
        beat = dict(self.beat, running=running[:4096], stopped=stopped, secret=self.secret)
        self.w.client.put_worker(self.w.id, beat)

    def run(self) -> None:
        failing = False
        while not self.stopping.is_set():
            try:
                self.send(stopped=False)
                failing = False
            except Exception as e:  # noqa: BLE001 - the server away: tried again at the next
                if not failing:
                    print(f"relay worker: could not send this worker's heartbeat ({e}); trying again", file=sys.stderr)
                failing = True
            self.stopping.wait(self.w.beat_every)

    def stop(self, thread: threading.Thread, told: bool) -> None:
        """Stops the heartbeats; ``told``: sends the last, saying it stopped,
        once a heartbeat still in flight is answered (a later "alive" would
        undo it)."""
        self.stopping.set()
        thread.join(self.w.client.timeout)
        if not told:
            return
        try:
            self.send(stopped=True)
        except Exception as e:  # noqa: BLE001
            print(f"relay worker: could not tell the server this worker stopped ({e})", file=sys.stderr)


class _Loop:
    """The worker's state, read and written by the loop's thread only (no
    locks): what is held, what is to be reported, calls in flight, the
    outage, the heartbeat. The other threads talk to it through its inbox."""

    def __init__(self, worker: Worker):
        self.w = worker
        self.client = worker.client
        self.stats = worker.stats
        #: Jobs leased and not yet answered for, by id.
        self.held: Dict[int, LeasedJob] = {}
        #: When each held job was leased (RFC 3339), for the heartbeats.
        self.started: Dict[int, str] = {}
        #: Ids in held whose lease the server answered lost.
        self.lost: Set[int] = set()
        #: Outcomes to report, oldest first, and when the oldest arrived.
        self.pending: List[Done] = []
        self.pending_since = 0.0
        self.busy = 0  # jobs given to handler threads, outcome not back yet
        #: Step records sent or to send, their handlers waiting on them.
        self.records: Set[_StepRecord] = set()
        # The outcomes that go without waiting for more: a sender's share of
        # the slots, but not so few that the calls cost more than the
        # overlap saves.
        self.share = max(-(-worker.concurrency // SENDERS), min(worker.concurrency, MIN_SHARE))
        self.in_flight = 0  # reports sent, not answered yet
        self.reserved = 0  # the slots those reports lease for
        self.polling = 0  # the slots the poll in flight leases for (0: none in flight)
        self.beating = False
        self.next_beat = math.inf
        self.deadline: Optional[float] = None  # the grace's end, once stopping
        self.outage = False
        self.recovered_at = 0.0  # when the server last answered again after an outage
        self.retry_at = 0.0
        self.backoff = BACKOFF_FIRST
        #: The outcomes made for outcomes the server refused: one refused
        #: in turn is dropped (no third try).
        self.refusals: Set[int] = set()
        #: The error that stopped the worker (a refused token), raised by run().
        self.fatal: Optional[RelayError] = None
        self.wait_lowered = False

    def run(self) -> None:
        while True:
            self.receive(self.wake_at() - time.monotonic())
            if self.fatal is not None:
                break
            now = time.monotonic()
            if self.w._stopping and self.deadline is None:
                self.deadline = now + self.w.grace
            if now >= self.next_beat:
                self.beat(now)
            if now >= self.retry_at:
                if self.can_report() and self.coalesced(now):
                    self.report()
                elif self.can_poll():
                    self.poll()
            if self.deadline is not None and (self.settled() or time.monotonic() >= self.deadline):
                break
        self.finish()

    # -- waiting -----------------------------------------------------------

    def wake_at(self) -> float:
        """When the loop has something to do unless a message comes first."""
        t = self.next_beat
        if self.deadline is not None:
            t = min(t, self.deadline)
        if self.can_report():
            t = min(t, max(self.retry_at, self.pending_since + COALESCE))
        elif self.can_poll():
            t = min(t, self.retry_at)
        return t

    def receive(self, timeout: float) -> None:
        """Handles the messages that came, waiting up to ``timeout`` for one."""
        inbox = self.w._inbox
        try:
            if timeout == math.inf:
                message = inbox.get()
            elif timeout > 0:
                message = inbox.get(timeout=timeout)
            else:
                message = inbox.get_nowait()
            while True:
                self.handle(message)
                if len(self.pending) >= self.share and self.in_flight < SENDERS:
                    return  # a share to send: the rest of the inbox can wait for the next batch
                message = inbox.get_nowait()
        except queue.Empty:
            pass

    def handle(self, message: Message) -> None:
        if message[0] == "done":
            self.finished(message[1], message[2], message[3])
        elif message[0] == "step":
            self.records.add(message[3])
            self.add_pending(message[1], message[2], message[3])
        elif message[0] == "answered":
            call, answer = message[1], message[2]
            if isinstance(answer, _FATAL):
                self.stop_for(answer)
            if call.kind == "beat":
                self.beaten(call, answer)
            elif call.kind == "poll":
                self.polled(call, answer)
            else:
                self.reported(call, answer)

    def can_report(self) -> bool:
        return bool(self.pending) and self.in_flight < SENDERS

    def coalesced(self, now: float) -> bool:
        """Whether the pending outcomes go now: nothing else is about to
        finish, they are a sender's share of the slots (so that the slots
        split into batches that take turns on the server), or the oldest
        has waited long enough."""
        return (
            self.busy == len(self.records)  # every handler waits on a record
            or len(self.pending) >= self.share
            or self.deadline is not None
            or now >= self.pending_since + COALESCE
        )

    def free(self) -> int:
        return self.w.concurrency - self.busy - self.reserved - self.polling

    def can_poll(self) -> bool:
        return self.deadline is None and not self.polling and not self.pending and self.free() > 0

    def settled(self) -> bool:
        return self.busy == 0 and not self.pending and not self.polling and not self.in_flight

    def lease(self, slots: int, wait: float) -> LeaseRequest:
        return LeaseRequest(self.w.queues, min(slots, LEASE_MAX), self.w.lease_for, wait, self.w.id)

    # -- jobs coming and going ---------------------------------------------

    def start(self, jobs: List[LeasedJob]) -> None:
        """Hands leased jobs to the handler threads (or gives them back
        untried when stopping)."""
        if not jobs:
            return
        if self.deadline is not None:
            for job in jobs:
                self.held[job.id] = job
                self.add_pending(job, Outcome.release(job.id, job.token), "released")
            return
        give = self.w._jobs.put
        run_async, aloop = self.w._async, self.w._aloop
        for job in jobs:
            # The same id again: its earlier lease was lost (it expired),
            # that handler's outcome will be dropped.
            self.lost.discard(job.id)
            self.held[job.id] = job
            self.started[job.id] = _now()
            if aloop is not None and run_async.get(job.kind):
                asyncio.run_coroutine_threadsafe(self.w._run_async(job), aloop)
            else:
                give(job)
        self.busy += len(jobs)
        shortest = min(job.lease_for_ms for job in jobs) / 3000.0
        self.next_beat = min(self.next_beat, time.monotonic() + shortest)

    def finished(self, job: LeasedJob, outcome: Outcome, stat: str) -> None:
        self.busy -= 1
        if self.held.get(job.id) is not job:
            self.stats.lost += 1  # leased to us again since: this lease was lost
        elif job.id in self.lost:
            del self.held[job.id]
            self.started.pop(job.id, None)
            self.lost.discard(job.id)
            self.stats.lost += 1
        else:
            self.add_pending(job, outcome, stat)

    def add_pending(self, job: LeasedJob, outcome: Outcome, stat: str) -> None:
        if not self.pending:
            self.pending_since = time.monotonic()
        self.pending.append((job, outcome, stat))

    # -- calls -------------------------------------------------------------

    def report(self) -> None:
        """Sends the pending outcomes, leasing jobs for the free slots in the
        same call (none once stopping)."""
        batch, self.pending = self.pending, []
        slots = self.free() if self.deadline is None else 0
        lease = self.lease(slots, 0.0) if slots > 0 else None
        self.in_flight += 1
        self.reserved += lease.max if lease else 0
        self.w._calls.put(_Call("report", batch, lease))

    def reported(self, call: _Call, answer: Union[WorkAnswer, Exception]) -> None:
        self.in_flight -= 1
        self.reserved -= call.slots
        if self.fatal is not None:
            return  # nothing can be reported any more
        if isinstance(answer, _REFUSED):
            self.refused(call, answer)
        elif isinstance(answer, Exception):
            # Kept and sent again after the back-off.
            self.pending = call.batch + self.pending
            self.pending_since = 0.0
            self.failed(f"report {len(call.batch)} outcomes", answer, call)
        else:
            self.answered()
            self.settle(call.batch, answer.outcomes)
            self.start(answer.jobs)

    def refused(self, call: _Call, error: Exception) -> None:
        """A call refused as a whole would be refused again. Each outcome
        goes alone, without a lease: the one refused alone (a result over
        the server's body limit) is replaced by a nack saying so."""
        if call.kind == "alone":
            self.refused_for_good(call.batch[0], error)
            return
        for done in call.batch:
            self.in_flight += 1
            self.w._calls.put(_Call("alone", [done]))

    def refused_for_good(self, done: Done, error: Exception) -> None:
        """The server refused this outcome and would refuse it again: the
        job is nacked with the refusal as its error (its attempt counts, its
        error says why), once; a nack refused in turn is dropped."""
        job, outcome, stat = done
        if isinstance(stat, _StepRecord):
            self.stepped(stat, error)
            return
        if outcome in self.refusals:
            self.refusals.discard(outcome)
            self.forget(job, f"could not report its outcome ({error}); its lease will expire")
            return
        self.refusals.discard(outcome)
        why = _cut(f"the server refused this job's outcome ({outcome.outcome}): {error}")
        nack = Outcome.nack(job.id, job.token, why)
        print(f"relay worker: job {job.id}: {why}; nacked", file=sys.stderr)
        self.refusals.add(nack)
        self.add_pending(job, nack, "failed")

    def settle(self, batch: List[Done], answers: List[OutcomeAnswer]) -> None:
        """Counts what the server answered for each outcome."""
        stats = self.stats
        for done, answer in zip(batch, answers):
            job, outcome, stat = done
            if isinstance(stat, _StepRecord):
                self.stepped(stat, answer.error, answer.earlier)
                continue
            if isinstance(answer.error, _REFUSED) and not answer.lost:
                self.refused_for_good(done, answer.error)
                continue
            self.refusals.discard(outcome)
            if answer.error is None:
                setattr(stats, stat, getattr(stats, stat) + 1)
                self.drop(job)
            elif answer.lost:
                stats.lost += 1
                self.drop(job)
            else:
                self.forget(job, f"could not report its outcome ({answer.error}); its lease will expire")

    def stepped(
        self, record: _StepRecord, error: Optional[BaseException], earlier: Optional[Dict[str, Any]] = None
    ) -> None:
        """Hands a step record's answer to the handler waiting on it."""
        record.error = error
        record.earlier = earlier
        if record in self.records:
            self.records.discard(record)
            record.done.release()
            if record.wake is not None:
                record.wake()

    def drop(self, job: LeasedJob) -> None:
        if self.held.get(job.id) is job:
            del self.held[job.id]
            self.started.pop(job.id, None)
            self.lost.discard(job.id)

    def forget(self, job: LeasedJob, why: str) -> None:
        print(f"relay worker: job {job.id}: {why}", file=sys.stderr)
        self.drop(job)

    def poll(self) -> None:
        """Asks the poller to long-poll for the free slots."""
        lease = self.lease(self.free(), self.w.poll_wait)
        self.polling = lease.max
        self.w._polls.put(_Call("poll", lease=lease))

    def polled(self, call: _Call, answer: Union[WorkAnswer, Exception]) -> None:
        self.polling = 0
        if self.fatal is not None:
            return
        if isinstance(answer, _REFUSED) and self.lower_wait(answer):
            return  # polled again at once with the lower wait
        if isinstance(answer, Exception):
            self.failed("lease", answer, call)
            return
        self.answered()
        self.start(answer.jobs)

    def lower_wait(self, error: RelayError) -> bool:
        """A long-poll refused for its ``wait_ms`` (the server's
        ``--max-wait`` is lower than ``poll_wait``): waits what the server
        allows (or 1 s) from now on. Once; False if not that."""
        if self.wait_lowered or "wait_ms" not in error.message:
            return False
        self.wait_lowered = True
        most = re.search(r"at most (\d+)", error.message)
        wait = int(most.group(1)) / 1000.0 if most else 1.0
        wait = min(wait, self.w.poll_wait) if wait > 0 else 1.0
        print(
            f"relay worker: the server refused a long-poll of {self.w.poll_wait} s ({error}); polling {wait} s instead",
            file=sys.stderr,
        )
        self.w.poll_wait = wait
        return True

    def beat(self, now: float) -> None:
        """Extends every lease held, in one call."""
        jobs = list(self.held.values())
        if not jobs:
            self.next_beat = math.inf
            return
        self.next_beat = now + min(job.lease_for_ms for job in jobs) / 3000.0
        if not self.beating:  # else the last one is still in flight: the server is slow
            self.beating = True
            self.w._calls.put(_Call("beat", jobs=jobs))

    def beaten(self, call: _Call, answer: Union[List[LeaseExtension], Exception]) -> None:
        """Marks the leases answered lost; a failed beat waits for the next."""
        self.beating = False
        if isinstance(answer, Exception):
            return
        for job, extension in zip(call.jobs, answer):
            if extension.lost and self.held.get(job.id) is job:
                self.lost.add(job.id)

    # -- outages -----------------------------------------------------------

    def failed(self, what: str, error: Exception, call: _Call) -> None:
        if call.sent_at < self.recovered_at:
            return  # sent before the server answered again: the outage that was, not a new one
        if not self.outage:
            self.outage = True
            print(f"relay worker: cannot {what} ({error}); retrying with back-off", file=sys.stderr)
        self.retry_at = time.monotonic() + self.backoff
        self.backoff = min(self.backoff * 2, BACKOFF_MAX)

    def stop_for(self, error: RelayError) -> None:
        """The token is refused: stops at once (no grace, nothing reported;
        run() raises ``error``)."""
        if self.fatal is not None:
            return
        self.fatal = error
        print(f"relay worker: the server refuses this worker's token ({error}); stopping", file=sys.stderr)
        self.w._stopping = True
        self.deadline = time.monotonic()

    def answered(self) -> None:
        if self.outage:
            self.outage = False
            self.recovered_at = time.monotonic()
            print(f"relay worker: {self.client.url} answers again", file=sys.stderr)
        self.backoff = BACKOFF_FIRST
        self.retry_at = 0.0

    # -- stopping ----------------------------------------------------------

    def finish(self) -> None:
        """After the grace: releases the jobs still running and reports
        everything pending, in one last call."""
        while self.polling or self.in_flight or self.beating:
            self.receive(math.inf)  # what calls in flight bring is given back too
        self.take_unstarted()
        with self.w._closing:
            self.w._closed = True  # no step record comes after this
        # Outcomes that came in since the loop's last look (right at the
        # grace's end) are reported, not their jobs released.
        self.drain()
        try:
            self.report_last()
        finally:
            for record in list(self.records):
                self.stepped(record, Unavailable("the worker stopped before the step was recorded"))

    def report_last(self) -> None:
        """Sends what is pending, the jobs still running released, in one
        last call (a refused outcome alone, as in refused())."""
        if self.fatal is not None:
            return  # the token is refused: nothing can be reported
        reported = {job.id for job, _, stat in self.pending if not isinstance(stat, _StepRecord)}
        for job in list(self.held.values()):
            if job.id not in reported:
                self.pending.append((job, Outcome.release(job.id, job.token), "released"))
        batches = [self.pending] if self.pending else []
        self.pending = []
        while batches:
            batch = batches.pop(0)
            try:
                answer = self.client.work([o for _, o, _ in batch])
            except _REFUSED as e:
                if len(batch) > 1:
                    batches += [[done] for done in batch]  # each alone, as in refused()
                else:
                    self.refused_for_good(batch[0], e)
            except Exception as e:  # noqa: BLE001
                print(
                    f"relay worker: could not report {len(batch)} outcomes at stop ({e}); their leases will expire",
                    file=sys.stderr,
                )
                for _, _, stat in batch:
                    if isinstance(stat, _StepRecord):
                        self.stepped(stat, e)
            else:
                self.settle(batch, answer.outcomes)
            if self.pending:  # nacks for refused outcomes
                batches.append(self.pending)
                self.pending = []

    def drain(self) -> None:
        """Handles every message in the inbox, without waiting."""
        inbox = self.w._inbox
        while True:
            try:
                message = inbox.get_nowait()
            except queue.Empty:
                return
            self.handle(message)

    def take_unstarted(self) -> None:
        """Takes back the jobs no handler thread has started: they are
        released with the running ones, no thread may start them after."""
        while True:
            try:
                self.w._jobs.get_nowait()
            except queue.Empty:
                return
