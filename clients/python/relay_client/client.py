"""A client of Relay's HTTP API (``relay serve``), standard library only.

Payloads and results are bytes on the server, JSON by convention. A JSON
value given here (a dict, list, str, number, bool) is sent as JSON and comes
back as that value; ``bytes`` are sent as base64 and come back as ``bytes``;
``None`` is no payload.
"""

from __future__ import annotations

import base64
import json
import sys
import time
import re
import urllib.parse
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Iterable, Iterator, List, Literal, Optional, Sequence, Tuple, Union

from ._http import Connections, TransportError
from .errors import InvalidState, LeaseLost, NotFound, RelayError, Unavailable, error_for

JSONValue = Any
"""Any value ``json.dumps`` takes."""

Payload = Union[JSONValue, bytes, None]


def _ms(seconds: Optional[float]) -> Optional[int]:
    return None if seconds is None else max(0, int(round(seconds * 1000)))


def _put_payload(body: Dict[str, Any], name: str, value: Payload) -> None:
    if value is None:
        return
    if isinstance(value, (bytes, bytearray, memoryview)):
        body[f"{name}_base64"] = base64.b64encode(bytes(value)).decode("ascii")
    else:
        body[name] = value


def _get_payload(obj: Dict[str, Any], name: str) -> Payload:
    if f"{name}_base64" in obj:
        return base64.b64decode(obj[f"{name}_base64"])
    return obj.get(name)


# POST calls that may be sent twice: applying one again changes nothing (an
# ack, nack, release ... repeated with its token; a work call, see work()).
_REPEATABLE_POST = re.compile(
    r"/v1/(work|heartbeat|jobs/[0-9]+/(ack|nack|release|extend|cancel|retry|steps)|(queues|schedules)/[^/]+/(pause|resume))"
)


def _repeatable(
    method: str, path: str, body: Optional[Dict[str, Any]], headers: Optional[Dict[str, str]] = None
) -> bool:
    """Whether a request may be sent again when it failed on a reused
    connection before any answer came: the server may have applied it."""
    if method in ("GET", "DELETE", "PUT"):
        return True
    if method != "POST":
        return False
    if path == "/v1/jobs":
        # A submit: a repeat finds the job its idempotency key made, or the
        # one its unique key holds.
        return body is not None and (body.get("idempotency_key") is not None or body.get("unique_key") is not None)
    if path == "/v1/jobs/batch":
        # A batch: a repeat answers the same ids when every job is keyed,
        # by the Idempotency-Key header (key/index) or a key of its own.
        if headers is not None and "Idempotency-Key" in headers:
            return True
        jobs = (body or {}).get("jobs") or []
        return bool(jobs) and all(j.get("idempotency_key") is not None for j in jobs)
    return _REPEATABLE_POST.fullmatch(path) is not None


# The answers that mean "this worker no longer holds the job" (another
# worker may, or it finished, was cancelled or deleted): drop its outcome.
_NOT_OURS = (LeaseLost, InvalidState, NotFound)


@dataclass
class LeasedJob:
    """A job this worker holds under ``token`` until ``lease_expires_at``."""

    id: int
    token: int
    queue: str
    kind: str
    priority: int
    attempt: int
    max_attempts: int
    lease_expires_at: str
    lease_for_ms: int
    timeout_ms: Optional[int]
    payload: Payload
    #: The W3C trace context the job was submitted in (continue the trace
    #: from it in the handler), or None.
    traceparent: Optional[str] = None
    #: The group (tenant) the job belongs to, or None.
    group: Optional[str] = None
    #: The steps earlier runs of the job recorded (``name``, ``attempt``,
    #: ``at``, ``bytes``, ``output`` or ``output_base64``), or None: a
    #: worker's handler returns their outputs instead of running them again
    #: (:meth:`relay_client.JobContext.step`).
    steps: Optional[List[Dict[str, Any]]] = None

    @classmethod
    def from_json(cls, v: Dict[str, Any]) -> "LeasedJob":
        # Positional, by the class's own field names (spelled once, above)
        # and without _read's per-field checks: a worker decodes thousands
        # of these a second.
        job = cls(*map(v.get, _LEASED_FIELDS))
        if job.lease_for_ms is None:  # a server older than the field
            job.lease_for_ms = 30_000
        b64 = v.get("payload_base64")
        if b64 is not None:
            job.payload = base64.b64decode(b64)
        return job


_LEASED_FIELDS = tuple(f.name for f in fields(LeasedJob))


@dataclass
class Job:
    """A job as the server reads it back (``raw`` holds every field)."""

    id: int
    queue: str
    kind: str
    state: str
    priority: int
    attempts: int
    max_attempts: int
    last_error: Optional[str]
    payload: Payload
    result: Payload
    waiting_on: int = 0
    traceparent: Optional[str] = None
    tags: List[str] = field(default_factory=list)
    #: The group (tenant) it belongs to, if any.
    group: Optional[str] = None
    #: What its handler last reported of its run (``fraction`` 0-1,
    #: ``message``, ``at``, ``attempt``); None until one does.
    progress: Optional[Dict[str, Any]] = None
    #: The steps its handlers recorded (``name``, ``attempt``, ``at``,
    #: ``bytes``, ``output`` or ``output_base64``), in the order recorded.
    steps: List[Dict[str, Any]] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, v: Dict[str, Any]) -> "Job":
        return _read(cls, v)


def _read(cls: Any, v: Dict[str, Any]) -> Any:
    """An answer object as the dataclass ``cls``, field by field under the
    server's own names (each field is spelled once, in the class): a
    payload or result decoded (JSON value, or bytes from ``*_base64``), a
    nested job template read as one, ``raw`` the whole object."""
    args: Dict[str, Any] = {}
    for f in fields(cls):
        if f.name == "raw":
            args["raw"] = v
        elif f.name in ("payload", "result"):
            args[f.name] = _get_payload(v, f.name)
        elif f.name == "job" and isinstance(v.get("job"), dict):
            args["job"] = _read(JobTemplate, v["job"])
        elif f.name in v:
            args[f.name] = v[f.name]
    return cls(**args)


@dataclass
class JobPage:
    """A page of :meth:`Client.list_jobs`, newest first: ``next`` is the
    ``before`` of the next page, None after the last."""

    jobs: List[Job]
    next: Optional[int]


@dataclass
class DeadGroup:
    """DEAD jobs of one queue and kind that failed with the same first
    line of error: how many, the newest's id and when it died."""

    queue: str
    kind: str
    error: str
    count: int
    newest: int
    last_at: str


@dataclass
class QueueLimits:
    """A queue's limits: at most ``max_leased`` of its jobs LEASED at once,
    at most ``rate_limit["limit"]`` leases per ``rate_limit["per_ms"]``
    (None: no such limit); a job whose lease expires ``poison_after`` times
    is DEAD (None: the server's default, 3); at most ``max_leased_per_group``
    jobs of one group LEASED at once (None: no such limit)."""

    queue: str
    max_leased: Optional[int] = None
    rate_limit: Optional[Dict[str, int]] = None
    poison_after: Optional[int] = None
    max_leased_per_group: Optional[int] = None


Keep = Union[float, str, None]
"""How long a finished job is kept: seconds after it finished, ``"forever"``,
or None (the server's default)."""


def _keep(value: Keep) -> Any:
    if value is None or value == "forever":
        return value
    if isinstance(value, str) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"a retention is seconds (>= 0), 'forever' or None, got {value!r}")
    return _ms(value)


@dataclass
class QueueRetention:
    """How long a queue keeps its finished jobs, by final state
    (``"succeeded"``, ``"dead"``, ``"cancelled"``): ``own`` holds the states
    the queue sets (the others follow the server's default), ``effective``
    what the prune keeps of each.
    Each value is milliseconds after the job finished, or ``"forever"``."""

    queue: str
    own: Dict[str, Any]
    effective: Dict[str, Any]


@dataclass
class JobTemplate:
    """The job each tick of a schedule enqueues (for
    :meth:`Client.put_schedule`, and in a :class:`Schedule`)."""

    queue: str
    kind: str
    payload: Payload = None
    priority: Optional[int] = None
    max_attempts: Optional[int] = None
    #: The group (a tenant) of each tick's job: see :meth:`Client.submit`.
    group: Optional[str] = None

    def body(self) -> Dict[str, Any]:
        b: Dict[str, Any] = {"queue": self.queue, "kind": self.kind}
        _put_payload(b, "payload", self.payload)
        if self.priority is not None:
            b["priority"] = self.priority
        if self.max_attempts is not None:
            b["max_attempts"] = self.max_attempts
        if self.group is not None:
            b["group"] = self.group
        return b


@dataclass
class Schedule:
    """A schedule of periodic jobs: ``cron`` (in ``tz``) or ``every_ms``,
    the :class:`JobTemplate` each tick enqueues, and its times (RFC 3339)."""

    name: str
    job: JobTemplate
    paused: bool
    created_at: str
    next_at: str
    cron: Optional[str] = None
    tz: Optional[str] = None
    every_ms: Optional[int] = None
    last_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class NewJob:
    """A job to submit with :meth:`Client.submit_batch` (the same fields as
    :meth:`Client.submit`'s arguments)."""

    queue: str
    kind: str
    payload: Payload = None
    priority: Optional[int] = None
    delay: Optional[float] = None
    run_at: Optional[str] = None
    max_attempts: Optional[int] = None
    unique_key: Optional[str] = None
    lease_for: Optional[float] = None
    timeout: Optional[float] = None
    depends_on: Optional[Sequence[int]] = None
    on_dependency_failure: Optional[str] = None
    #: The W3C trace context the job continues (``traceparent`` header
    #: value), handed to the worker that runs it.
    traceparent: Optional[str] = None
    #: Short labels to find the job by (at most 8).
    tags: Optional[Sequence[str]] = None
    #: Makes submitting it safe to repeat: for 24 h a submit with this key
    #: (1-256 characters) answers the first one's job and creates nothing.
    idempotency_key: Optional[str] = None
    #: At most one job per ``unique_key`` per this many seconds: within it
    #: a throttled submit of the key answers that job, even once finished.
    throttle: Optional[float] = None
    #: Runs the job this many seconds after the last submit of its
    #: ``unique_key``: while the key's job has not started, a debounced
    #: submit replaces its payload and moves its run time to now + this.
    debounce: Optional[float] = None
    #: The group (a tenant, a customer, 1-256 characters) the job belongs
    #: to: the queue's claims take groups in turn, and its
    #: ``max_leased_per_group`` bounds each group's leases.
    group: Optional[str] = None

    def body(self) -> Dict[str, Any]:
        b: Dict[str, Any] = {"queue": self.queue, "kind": self.kind}
        _put_payload(b, "payload", self.payload)
        for key, value in [
            ("priority", self.priority),
            ("delay_ms", _ms(self.delay)),
            ("run_at", self.run_at),
            ("max_attempts", self.max_attempts),
            ("unique_key", self.unique_key),
            ("idempotency_key", self.idempotency_key),
            ("throttle_ms", _ms(self.throttle)),
            ("debounce_ms", _ms(self.debounce)),
            ("lease_for_ms", _ms(self.lease_for)),
            ("timeout_ms", _ms(self.timeout)),
            ("depends_on", list(self.depends_on) if self.depends_on else None),
            ("on_dependency_failure", self.on_dependency_failure),
            ("traceparent", self.traceparent),
            ("tags", list(self.tags) if self.tags else None),
            ("group", self.group),
        ]:
            if value is not None:
                b[key] = value
        return b


class Submitted(int):
    """What :meth:`Client.submit` returns: the job's id (an ``int``, printed
    and compared as one), with ``existing`` True when the submit made no
    job: an earlier submit with its ``idempotency_key`` had, or an
    unfinished job holds its ``unique_key``."""

    existing: bool

    def __new__(cls, id: int, existing: bool = False) -> "Submitted":
        self = super().__new__(cls, id)
        self.existing = existing
        return self


# The longest one long-poll of Client.result waits: below the server's
# default --max-wait (60 s).
RESULT_WAIT = 30.0

OutcomeKind = Literal["ack", "nack", "release", "sleep", "wait", "step", "join"]


class Outcome:
    """One job's outcome for :meth:`Client.work`; make it with :meth:`ack`,
    :meth:`nack` or :meth:`release` (the same fields as those calls).

    It is encoded when it is made, so a result that ``json.dumps`` refuses
    (not JSON, NaN or an infinity, nested too deep) raises ``TypeError``,
    ``ValueError`` or ``RecursionError`` there, in the caller's thread, and
    not in the middle of a batch of other jobs' outcomes.
    """

    __slots__ = ("id", "token", "outcome", "json")

    def __init__(self, id: int, token: int, outcome: OutcomeKind, fields: Optional[Dict[str, Any]] = None):
        self.id = id
        self.token = token
        self.outcome = outcome
        #: The item as the request carries it (JSON text).
        # allow_nan=False: NaN and Infinity are not JSON, the server would
        # refuse the whole call that carries them.
        self.json = json.dumps({"id": id, "token": token, "outcome": outcome, **(fields or {})}, allow_nan=False)

    @classmethod
    def ack(cls, id: int, token: int, result: Payload = None) -> "Outcome":
        """Success, with ``result`` (a JSON value, or bytes) as the job's result."""
        fields: Dict[str, Any] = {}
        _put_payload(fields, "result", result)
        return cls(id, token, "ack", fields)

    @classmethod
    def nack(
        cls, id: int, token: int, error: str, *, retry_in: Optional[float] = None, permanent: bool = False
    ) -> "Outcome":
        """Failure: RETRYING for ``retry_in`` seconds (or the back-off), then READY,
        DEAD when attempts are spent or ``permanent``."""
        fields: Dict[str, Any] = {"error": error}
        if retry_in is not None:
            fields["retry_in_ms"] = _ms(retry_in)
        if permanent:
            fields["permanent"] = True
        return cls(id, token, "nack", fields)

    @classmethod
    def release(cls, id: int, token: int, *, in_: Optional[float] = None) -> "Outcome":
        """The job back untried (no attempt counted); with ``in_``,
        SCHEDULED for that many seconds, then READY (a snooze)."""
        return cls(id, token, "release", None if in_ is None else {"in_ms": _ms(in_)})

    @classmethod
    def sleep(cls, id: int, token: int, step: str, until: str) -> "Outcome":
        """The job asleep under step ``step`` until ``until`` (RFC 3339):
        WAITING, holding no lease and no attempt, then READY. A step of
        that name recorded earlier wins, its time with it."""
        return cls(id, token, "sleep", {"step": step, "until": until})

    @classmethod
    def wait(cls, id: int, token: int, step: str, key: str, until: str) -> "Outcome":
        """The job waiting for event ``key`` under step ``step`` until
        ``until`` (RFC 3339): WAITING, holding no lease and no attempt,
        until the event is emitted (READY at once when it was already) or
        the time runs out."""
        return cls(id, token, "wait", {"step": step, "key": key, "until": until})

    @classmethod
    def join(cls, id: int, token: int, step: str, child: int) -> "Outcome":
        """The job awaiting job ``child``'s end under step ``step``: WAITING,
        holding no lease and no attempt, until the child's end records how
        it ended as the step (READY at once when it has ended already)."""
        return cls(id, token, "join", {"step": step, "child": child})

    @classmethod
    def step(cls, id: int, token: int, step: str, output: Payload = None) -> "Outcome":
        """Step ``step`` of the job recorded with ``output`` (a JSON value,
        or bytes), the job still leased: as :meth:`Client.record_step`. When
        a record of the name stood already it stands, and the answer's
        ``earlier`` holds it."""
        fields: Dict[str, Any] = {"step": step}
        _put_payload(fields, "output", output)
        return cls(id, token, "step", fields)

    def __repr__(self) -> str:
        return f"Outcome({self.json})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Outcome) and other.json == self.json

    def __hash__(self) -> int:
        return hash(self.json)


@dataclass
class LeaseRequest:
    """What :meth:`Client.work` leases along with its outcomes (the
    arguments of :meth:`Client.lease`). ``wait`` is honoured only by a call
    without outcomes: a report is never held back by a long-poll."""

    queues: Sequence[str]
    max: int = 1
    lease_for: float = 30.0
    wait: float = 0.0
    worker: Optional[str] = None

    def body(self) -> Dict[str, Any]:
        b: Dict[str, Any] = {
            "queues": list(self.queues),
            "max": self.max,
            "lease_for_ms": _ms(self.lease_for),
            "wait_ms": _ms(self.wait),
        }
        if self.worker is not None:
            b["worker"] = self.worker
        return b


class _ItemAnswered:
    """What one item of a batch call says: applied (``ok``), or refused with
    ``error``; ``lost`` when the job is not this worker's any more (lease
    lost, finished, cancelled or deleted): drop its outcome."""

    error: Optional[RelayError]

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def lost(self) -> bool:
        return isinstance(self.error, _NOT_OURS)


@dataclass
class OutcomeAnswer(_ItemAnswered):
    """How the server took one outcome of :meth:`Client.work`: applied
    (``state``, and ``ready_at`` when the job is due again), or not, with
    ``error`` the exception its code names (returned, not raised)."""

    id: int
    state: Optional[str] = None
    ready_at: Optional[str] = None
    error: Optional[RelayError] = None
    #: A step record whose name was recorded already: the record that
    #: stands (``name``, ``attempt``, ``at``, ``output`` or
    #: ``output_base64``); this one was not taken.
    earlier: Optional[Dict[str, Any]] = None

    @classmethod
    def from_json(cls, v: Dict[str, Any]) -> "OutcomeAnswer":
        err = v.get("error")
        if err is not None:
            return cls(v["id"], error=error_for(None, err["code"], err["message"]))
        return cls(v["id"], v.get("state"), v.get("ready_at"), earlier=v.get("earlier"))


@dataclass
class WorkAnswer:
    """The answer of :meth:`Client.work`: one :class:`OutcomeAnswer` per
    outcome, in the order given, and the jobs leased."""

    outcomes: List[OutcomeAnswer]
    jobs: List[LeasedJob]


@dataclass
class LeaseExtension(_ItemAnswered):
    """How the server took one lease of :meth:`Client.heartbeat`: extended
    to ``lease_expires_at``, or not, with ``error`` (returned, not raised)."""

    id: int
    lease_expires_at: Optional[str] = None
    error: Optional[RelayError] = None


    @classmethod
    def from_json(cls, v: Dict[str, Any]) -> "LeaseExtension":
        err = v.get("error")
        if err is not None:
            return cls(v["id"], error=error_for(None, err["code"], err["message"]))
        return cls(v["id"], v.get("lease_expires_at"))


HeldLease = Union[LeasedJob, Tuple[int, int], Tuple[int, int, float]]
"""A lease to extend: a leased job, ``(id, token)``, or ``(id, token,
lease_for)`` with a length of its own in seconds."""


class Client:
    """Relay's HTTP API. Thread-safe: each thread keeps its own keep-alive
    connection (made at its first call, made again after an error).

    >>> client = Client("http://127.0.0.1:7433", token="secret")  # doctest: +SKIP
    >>> job_id = client.submit("emails", "send", {"to": "ada@example.com"})  # doctest: +SKIP

    Times are in seconds (floats). Every error the server answers raises
    the :mod:`relay_client.errors` class named after its code; a server
    that does not answer raises :class:`~relay_client.errors.Unavailable`.
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._connections = Connections(self.url)

    def close(self) -> None:
        """Closes the calling thread's connection (the next call makes one)."""
        self._connections.close()

    # -- plumbing --------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: Optional[Dict[str, Any]] = None,
        timeout: Optional[float] = None,
        *,
        data: Optional[bytes] = None,
        headers: Optional[Dict[str, str]] = None,
    ) -> Any:
        status, raw = self._send(method, path, body, timeout, data=data, headers=headers)
        if status >= 400:
            raise self._error(method, path, status, raw)
        return self._json(method, path, status, raw)

    def _send(
        self,
        method: str,
        path: str,
        body: Optional[Dict[str, Any]] = None,
        timeout: Optional[float] = None,
        *,
        data: Optional[bytes] = None,
        headers: Optional[Dict[str, str]] = None,
    ) -> Tuple[int, bytes]:
        """Sends a request; its status and body, whatever the status."""
        if data is None and body is not None:
            # A NaN or an infinity (not JSON) raises ValueError here rather
            # than the server refusing the call.
            data = json.dumps(body, allow_nan=False).encode("utf-8")
        repeatable = _repeatable(method, path, body, headers)
        headers = dict(headers or {})
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            status, raw = self._connections.request(
                method, path, data, headers, timeout or self.timeout, repeatable=repeatable
            )
        except TransportError as e:
            raise Unavailable(
                f"cannot reach Relay at {self.url} ({str(e) or type(e).__name__}); is `relay serve` running there?"
            ) from None
        return status, raw

    @staticmethod
    def _json(method: str, path: str, status: int, raw: bytes) -> Any:
        try:
            return json.loads(raw) if raw else None
        except RecursionError:
            # The server sends payloads as stored; Python's json module
            # cannot read JSON nested deeper than about 1,000 levels.
            raise RelayError(
                f"{method} {path}: the answer holds JSON nested deeper than Python's json module reads "
                f"(sys.getrecursionlimit() = {sys.getrecursionlimit()}); read that job with another client or the CLI",
                status=status,
            ) from None
        except ValueError:
            raise RelayError(f"{method} {path}: HTTP {status}: the answer is not JSON: {raw[:200]!r}", status=status) from None

    @staticmethod
    def _error(method: str, path: str, status: int, raw: bytes) -> RelayError:
        try:
            err = json.loads(raw)["error"]
            return error_for(status, err["code"], err["message"])
        except (ValueError, KeyError, TypeError):
            return RelayError(f"{method} {path}: HTTP {status} without a Relay error body: {raw[:200]!r}", status=status)

    # -- submitting ------------------------------------------------------

    def submit(
        self,
        queue: str,
        kind: str,
        payload: Payload = None,
        *,
        priority: Optional[int] = None,
        delay: Optional[float] = None,
        run_at: Optional[str] = None,
        max_attempts: Optional[int] = None,
        unique_key: Optional[str] = None,
        lease_for: Optional[float] = None,
        timeout: Optional[float] = None,
        depends_on: Optional[Sequence[int]] = None,
        on_dependency_failure: Optional[str] = None,
        traceparent: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        idempotency_key: Optional[str] = None,
        throttle: Optional[float] = None,
        debounce: Optional[float] = None,
        group: Optional[str] = None,
    ) -> Submitted:
        """Submits one job; returns its id (for a ``unique_key`` an
        unfinished job holds, that job's id). Durable when it returns.

        With ``idempotency_key`` (1-256 characters) the submit is safe to
        repeat (after ``Unavailable`` or ``MaybeApplied``, say): for 24 h a
        submit with the same key creates nothing and returns the first
        one's job, whatever its state. The id returned is a
        :class:`Submitted` (an ``int``): its ``existing`` is True when the
        submit made no job (a key seen before).

        With ``throttle`` (seconds; needs ``unique_key``) at most one job of
        the key runs per that period: within it a throttled submit of the
        key returns its job, even once it has finished.

        With ``debounce`` (seconds; needs ``unique_key``, not with
        ``delay``, ``run_at`` or ``throttle``) the job runs that long after
        the last submit of the key: while the key's job has not started, a
        debounced submit replaces its payload and moves its run time to now
        + ``debounce`` (and returns its id, ``existing``).

        With ``group`` (a tenant, a customer) the queue's claims take the
        job's group in turn with the others (one job of each group with jobs
        READY a round), so a group with many jobs waiting never holds back
        one with few; the queue's ``max_leased_per_group`` bounds how many of
        one group are LEASED at once."""
        job = NewJob(
            queue,
            kind,
            payload,
            priority=priority,
            delay=delay,
            run_at=run_at,
            max_attempts=max_attempts,
            unique_key=unique_key,
            lease_for=lease_for,
            timeout=timeout,
            depends_on=depends_on,
            on_dependency_failure=on_dependency_failure,
            traceparent=traceparent,
            tags=tags,
            idempotency_key=idempotency_key,
            throttle=throttle,
            debounce=debounce,
            group=group,
        )
        v = self._call("POST", "/v1/jobs", job.body())
        return Submitted(v["id"], bool(v.get("existing", False)))

    def submit_batch(self, jobs: Iterable[NewJob], *, idempotency_key: Optional[str] = None) -> List[int]:
        """Submits 1-10,000 jobs in one call, all or none; returns their ids.

        With ``idempotency_key`` (sent as the ``Idempotency-Key`` header)
        the batch is safe to repeat: each job without a key of its own
        (``NewJob.idempotency_key``) gets ``key/0``, ``key/1``, ... by its
        index, and the same batch again within 24 h answers the same ids."""
        body = {"jobs": [j.body() for j in jobs]}
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else None
        return [int(i) for i in self._call("POST", "/v1/jobs/batch", body, headers=headers)["ids"]]

    # -- working ---------------------------------------------------------

    def lease(
        self,
        queues: Sequence[str],
        *,
        max: int = 1,
        lease_for: float = 30.0,
        wait: float = 0.0,
        worker: Optional[str] = None,
    ) -> List[LeasedJob]:
        """Leases up to ``max`` jobs of ``queues``; waits up to ``wait``
        seconds for one (a long-poll, woken at once by a submit)."""
        body: Dict[str, Any] = {
            "queues": list(queues),
            "max": max,
            "lease_for_ms": _ms(lease_for),
            "wait_ms": _ms(wait),
        }
        if worker is not None:
            body["worker"] = worker
        v = self._call("POST", "/v1/lease", body, timeout=self.timeout + wait)
        return [LeasedJob.from_json(j) for j in v["jobs"]]

    def ack(self, id: int, token: int, result: Payload = None) -> None:
        """Reports success. Repeating it with the same token is answered Ok."""
        body: Dict[str, Any] = {"token": token}
        _put_payload(body, "result", result)
        self._call("POST", f"/v1/jobs/{id}/ack", body)

    def nack(
        self, id: int, token: int, error: str, *, retry_in: Optional[float] = None, permanent: bool = False
    ) -> Dict[str, Any]:
        """Reports failure: RETRYING for ``retry_in`` (or the back-off), then READY,
        DEAD when attempts are spent or ``permanent``. Returns the state."""
        body: Dict[str, Any] = {"token": token, "error": error, "permanent": permanent}
        if retry_in is not None:
            body["retry_in_ms"] = _ms(retry_in)
        return dict(self._call("POST", f"/v1/jobs/{id}/nack", body))

    def extend(self, id: int, token: int, lease_for: float = 30.0) -> str:
        """Extends the lease to ``lease_for`` from now; returns the new expiry."""
        v = self._call("POST", f"/v1/jobs/{id}/extend", {"token": token, "lease_for_ms": _ms(lease_for)})
        return str(v["lease_expires_at"])

    def progress(self, id: int, token: int, fraction: float, message: Optional[str] = None) -> None:
        """Reports how far along a leased job is (``fraction`` from 0 to 1,
        and what the handler is doing, at most 1,024 characters): kept on
        the job (``Job.progress``, shown by the dashboard and ``relay
        show``) and logged as a "progress" event. From a handler:
        ``client.progress(job.id, job.token, 0.5, "page 2 of 4")``."""
        body: Dict[str, Any] = {"token": token, "fraction": fraction}
        if message is not None:
            body["message"] = message
        self._call("POST", f"/v1/jobs/{id}/progress", body)

    def record_step(self, id: int, token: int, name: str, output: Payload = None) -> Tuple[bool, Payload]:
        """Records the output of step ``name`` of a leased job under its
        lease (a JSON value, or ``bytes``): kept on the job and given with
        every later lease of it. Returns ``(True, output)`` when recorded, or
        ``(False, earlier)`` when a record of the name stood already (the
        first one wins; go on with ``earlier``). A worker's handler records
        its steps with :meth:`relay_client.JobContext.step`.

        Raises :class:`~relay_client.errors.LeaseLost` when the lease is no
        longer valid (nothing recorded), and
        :class:`~relay_client.errors.StepBound` past the job's 1,000 steps or
        1 MiB of output."""
        body: Dict[str, Any] = {"token": token, "name": name}
        _put_payload(body, "output", output)
        v = self._call("POST", f"/v1/jobs/{id}/steps", body)
        if v.get("recorded"):
            return True, output
        return False, _get_payload(v.get("earlier") or {}, "output")

    def create_token(self, id: int, token: int, timeout: float) -> Dict[str, Any]:
        """Makes a completion token for a leased job, open for ``timeout``
        seconds: ``{"id", "token", "path", "key", "expires_at"}``. Whoever
        holds ``token`` completes it once, without an API token
        (:meth:`complete_token`, or ``POST`` to ``path``). A worker's
        handler makes one with :meth:`relay_client.JobContext.token`."""
        body = {"token": token, "timeout_ms": max(1, int(round(timeout * 1000)))}
        return dict(self._call("POST", f"/v1/jobs/{id}/tokens", body))

    def complete_token(self, token: str, payload: Payload = None) -> Dict[str, Any]:
        """Completes a completion token (its ``<id>.<secret>``, or the URL
        that carries it) with ``payload`` (a JSON value, at most 64 KiB):
        the job waiting for it runs on with it. Needs no API token.
        Returns ``{"completed": True, "woken": n}``; raises
        :class:`~relay_client.errors.TokenUnknown`, ``TokenUsed``,
        ``TokenExpired`` or ``TokenClosed``."""
        if "/v1/tokens/" in token:
            token = token.split("/v1/tokens/", 1)[1].split("/", 1)[0]
        data = json.dumps(payload, allow_nan=False).encode("utf-8")
        return dict(self._call("POST", f"/v1/tokens/{urllib.parse.quote(token, safe='.')}/complete", data=data))

    def emit(self, key: str, payload: Payload = None) -> Dict[str, Any]:
        """Emits event ``key`` with ``payload`` (a JSON value, or bytes; at
        most 64 KiB): every job waiting for the key gets the payload and runs
        on, in this commit. The first emit of a key stands; the event is kept
        7 days, so a wait that begins later returns it at once. Returns
        ``{"first": bool, "woken": int}``."""
        body: Dict[str, Any] = {}
        _put_payload(body, "payload", payload)
        return dict(self._call("POST", f"/v1/events/{urllib.parse.quote(key, safe='')}", body))

    def release(self, id: int, token: int, *, in_: Optional[float] = None) -> None:
        """Gives the job back untried (no attempt counted); with ``in_``, it
        is SCHEDULED for that many seconds, then READY (a snooze)."""
        body: Dict[str, Any] = {"token": token}
        if in_ is not None:
            body["in_ms"] = _ms(in_)
        self._call("POST", f"/v1/jobs/{id}/release", body)

    def work(self, outcomes: Iterable[Outcome] = (), lease: Optional[LeaseRequest] = None) -> WorkAnswer:
        """Reports ``outcomes`` (at most 10,000) and leases the next jobs
        with ``lease``, in one call and one commit.

        Each outcome is answered on its own (:class:`OutcomeAnswer`, in the
        order given): one that was not applied carries its error instead
        of raising it. Only a failure of the whole call raises. Sending the
        same call again is safe: a repeated ack is answered with its state,
        a repeated nack or release with ``lease_lost``, nothing is applied
        twice. ``lease.wait`` long-polls only when ``outcomes`` is empty.
        """
        items = [o.json for o in outcomes]
        parts = ['{"outcomes":[', ",".join(items), "]"]
        wait = 0.0
        if lease is not None:
            parts += [',"lease":', json.dumps(lease.body())]
            wait = 0.0 if items else lease.wait
        parts.append("}")
        v = self._call("POST", "/v1/work", timeout=self.timeout + wait, data="".join(parts).encode("utf-8"))
        answers = [OutcomeAnswer.from_json(a) for a in v["outcomes"]]
        if len(answers) != len(items):
            raise RelayError(f"POST /v1/work: {len(answers)} outcomes answered for {len(items)} sent", status=200)
        return WorkAnswer(answers, [LeasedJob.from_json(j) for j in v["jobs"]])

    def heartbeat(self, leases: Iterable[HeldLease], lease_for: float = 30.0) -> List[LeaseExtension]:
        """Extends up to 10,000 leases in one call (none: a no-op that
        answers none), each to its own length (a
        ``(id, token, lease_for)``) or ``lease_for`` from now. Each is
        answered on its own, in the order given (:class:`LeaseExtension`);
        one answered ``lost`` is not this worker's any more."""
        items: List[Dict[str, Any]] = []
        for lease in leases:
            if isinstance(lease, LeasedJob):
                items.append({"id": lease.id, "token": lease.token})
            elif len(lease) == 3:
                items.append({"id": lease[0], "token": lease[1], "lease_for_ms": _ms(lease[2])})
            else:
                items.append({"id": lease[0], "token": lease[1]})
        v = self._call("POST", "/v1/heartbeat", {"leases": items, "lease_for_ms": _ms(lease_for)})
        return [LeaseExtension.from_json(x) for x in v["leases"]]

    # -- operating -------------------------------------------------------

    def cancel(self, id: int) -> None:
        self._call("POST", f"/v1/jobs/{id}/cancel", {})

    def retry(self, id: int, *, reset_steps: bool = False) -> None:
        """Runs a DEAD or CANCELLED job again. Its recorded steps are kept
        (it goes on after the last one) unless ``reset_steps``."""
        query = "?reset_steps=true" if reset_steps else ""
        self._call("POST", f"/v1/jobs/{id}/retry{query}", {})

    def delete(self, id: int) -> None:
        self._call("DELETE", f"/v1/jobs/{id}")

    def get(self, id: int) -> Job:
        return Job.from_json(self._call("GET", f"/v1/jobs/{id}"))

    def result(self, id: int, timeout: float = 30.0) -> Optional[Job]:
        """Awaits the job's end for at most ``timeout`` seconds: the job once
        it is SUCCEEDED, DEAD or CANCELLED (its ``result``, its
        ``last_error``), or ``None`` when it had not ended by then.
        Long-polls ``GET /v1/jobs/{id}/result`` (30 s a call), woken by the
        commit that ends the job. Raises :class:`~relay_client.errors.NotFound`
        for an unknown job."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            left = max(0.0, deadline - time.monotonic())
            wait_ms = int(min(left, RESULT_WAIT) * 1000)
            job = Job.from_json(
                self._call("GET", f"/v1/jobs/{id}/result?wait_ms={wait_ms}", timeout=self.timeout + wait_ms / 1000)
            )
            if job.state in ("SUCCEEDED", "DEAD", "CANCELLED"):
                return job
            if left <= 0:
                return None

    def events(self, id: int) -> List[Dict[str, Any]]:
        """The job's event log, oldest first (every page of it)."""
        out: List[Dict[str, Any]] = []
        after: Optional[int] = None
        while True:
            page = self.events_page(id, after=after)
            out.extend(page["events"])
            after = page.get("next")
            if after is None:
                return out

    def events_page(self, id: int, *, after: Optional[int] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """A page of the job's event log: ``events`` after ``seq`` ``after``, at most
        ``limit`` (1-1000) and 4 MiB of them, and ``next``, the next page's ``after``
        (None on the last page)."""
        query = "&".join(f"{k}={v}" for k, v in (("after", after), ("limit", limit)) if v is not None)
        path = f"/v1/jobs/{id}/events" + (f"?{query}" if query else "")
        return dict(self._call("GET", path))

    def append_event(self, id: int, kind: str, data: JSONValue = None) -> int:
        """Appends an event of your own to the job's log; returns its number."""
        body = {"kind": kind, "data": {} if data is None else data}
        return int(self._call("POST", f"/v1/jobs/{id}/events", body)["seq"])

    def stats(self) -> Dict[str, Any]:
        """Counts of every queue's jobs by state, and its settings, read a
        page of queues at a time (see `stats_page`)."""
        queues: Dict[str, Any] = {}
        after: Optional[str] = None
        while True:
            page = self.stats_page(after=after)
            queues.update(page["queues"])
            after = page.get("next")
            if after is None:
                return queues

    def stats_page(self, *, after: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """One page of queues' stats, in name order after `after`: up to
        `limit` (1-1000, the server's 1000 when left out). The answer holds
        `queues`, `next` (the `after` of the next page, or None after the
        last) and, on the first page only, `totals` over every queue."""
        q = {k: v for k, v in {"after": after, "limit": limit}.items() if v is not None}
        path = "/v1/stats" + ("?" + urllib.parse.urlencode(q) if q else "")
        v = self._call("GET", path)
        return {"queues": dict(v["queues"]), "next": v.get("next"), "totals": v.get("totals")}

    def jobs(self, *, queue: Optional[str] = None, state: Optional[str] = None, limit: int = 100) -> List[Job]:
        """The newest jobs, filtered by queue and state (the first page of
        :meth:`list_jobs`; an empty queue or state is no filter)."""
        return self.list_jobs(queue=queue or None, state=state or None, limit=limit).jobs

    def list_jobs(
        self,
        *,
        queue: Optional[str] = None,
        state: Optional[str] = None,
        kind: Optional[str] = None,
        tag: Optional[str] = None,
        since: Optional[str] = None,
        until: Optional[str] = None,
        error_contains: Optional[str] = None,
        before: Optional[int] = None,
        limit: Optional[int] = None,
    ) -> JobPage:
        """A page of jobs, newest first, that match every filter given:
        ``since``/``until`` bound the creation time (RFC 3339),
        ``error_contains`` searches the last error. Pass the page's ``next``
        as ``before`` for the next page (see :meth:`iter_jobs`)."""
        q = {
            "queue": queue,
            "state": state,
            "kind": kind,
            "tag": tag,
            "since": since,
            "until": until,
            "error_contains": error_contains,
            "before": before,
            "limit": limit,
        }
        v = self._call("GET", _query("/v1/jobs", q))
        return JobPage([Job.from_json(j) for j in v["jobs"]], v.get("next"))

    def iter_jobs(self, **filter: Any) -> Iterator[Job]:
        """Every job that matches ``filter`` (:meth:`list_jobs`'s
        arguments), newest first, read a page at a time."""
        before = filter.pop("before", None)
        while True:
            page = self.list_jobs(before=before, **filter)
            yield from page.jobs
            if page.next is None:
                return
            before = page.next

    def bulk(
        self,
        action: Literal["retry", "cancel", "delete"],
        *,
        queue: Optional[str] = None,
        state: Optional[str] = None,
        kind: Optional[str] = None,
        tag: Optional[str] = None,
        since: Optional[str] = None,
        until: Optional[str] = None,
        error_contains: Optional[str] = None,
    ) -> int:
        """Retries, cancels or deletes every job that matches the filter (at
        least one filter; jobs whose state does not allow the action are
        passed over); returns how many it changed. It is never cut off by
        the client's timeout: it may run for minutes on a million jobs."""
        filter = {
            k: v
            for k, v in {
                "queue": queue,
                "state": state,
                "kind": kind,
                "tag": tag,
                "since": since,
                "until": until,
                "error_contains": error_contains,
            }.items()
            if v is not None
        }
        v = self._call("POST", "/v1/jobs/bulk", {"action": action, "filter": filter}, timeout=_NO_TIMEOUT)
        return int(v["count"])

    def dead_groups(self, *, limit: Optional[int] = None) -> List[DeadGroup]:
        """The newest DEAD jobs grouped by queue, kind and the first line
        of their error, the largest groups first."""
        v = self._call("GET", _query("/v1/dead", {"limit": limit}))
        return [_read(DeadGroup, g) for g in v["groups"]]

    def queues(self) -> List[str]:
        """Every queue's name (queues with jobs, paused or limited), in byte
        order, read a page at a time (see :meth:`queues_page`)."""
        names: List[str] = []
        after: Optional[str] = None
        while True:
            page = self.queues_page(after=after)
            names += page["queues"]
            after = page["next"]
            if after is None:
                return names

    def queues_page(self, *, after: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """One page of queue names after ``after``: ``queues`` and ``next``
        (the ``after`` of the next page, None after the last)."""
        v = self._call("GET", _query("/v1/queues", {"after": after, "limit": limit}))
        return {"queues": list(v["queues"]), "next": v.get("next")}

    def get_queue(self, queue: str) -> Dict[str, Any]:
        """One queue: its jobs by state (``"READY"``, ``"SCHEDULED"``, ``"RETRYING"``, ``"DEAD"`` ...),
        ``oldest_ready_age_ms``, ``paused``, ``max_leased`` and
        ``rate_limit`` (every count zero for a queue nothing has used)."""
        return dict(self._call("GET", f"/v1/queues/{_segment(queue)}"))

    def pause_queue(self, queue: str) -> bool:
        """Pauses the queue: none of its jobs is leased (by any process on
        the store) until :meth:`resume_queue`; submits and completions go
        on. Returns True (paused)."""
        return bool(self._call("POST", f"/v1/queues/{_segment(queue)}/pause", {})["paused"])

    def resume_queue(self, queue: str) -> bool:
        """Resumes a paused queue; returns False (not paused)."""
        return bool(self._call("POST", f"/v1/queues/{_segment(queue)}/resume", {})["paused"])

    def set_queue_limits(
        self,
        queue: str,
        *,
        max_leased: Optional[int] = None,
        rate_limit: Optional[Tuple[int, float]] = None,
        poison_after: Optional[int] = None,
        max_leased_per_group: Optional[int] = None,
    ) -> QueueLimits:
        """Replaces the queue's limits: at most ``max_leased`` jobs LEASED
        at once, at most ``rate_limit = (n, seconds)`` leases per that many
        seconds; one left out (None) is lifted. A job whose lease expires
        ``poison_after`` times (its handler crashes or hangs its worker) is
        DEAD, whatever attempts it has left (None: the server's default, 3;
        0: never by expiries alone). At most ``max_leased_per_group`` jobs of
        one group (``submit(group=...)``) LEASED at once."""
        body: Dict[str, Any] = {"max_leased": max_leased, "rate_limit": None}
        if poison_after is not None:  # left out otherwise: older servers refuse the field
            body["poison_after"] = poison_after
        if max_leased_per_group is not None:  # likewise
            body["max_leased_per_group"] = max_leased_per_group
        if rate_limit is not None:
            body["rate_limit"] = {"limit": rate_limit[0], "per_ms": _ms(rate_limit[1])}
        return _read(QueueLimits, self._call("PUT", f"/v1/queues/{_segment(queue)}/limits", body))

    def get_retention(self, queue: str) -> QueueRetention:
        """How long the queue keeps its finished jobs: its own setting and
        what the prune keeps (its own, else the server's default)."""
        return _read(QueueRetention, self._call("GET", f"/v1/queues/{_segment(queue)}/retention"))

    def set_retention(
        self, queue: str, *, succeeded: Keep = None, dead: Keep = None, cancelled: Keep = None
    ) -> QueueRetention:
        """Replaces how long the queue keeps its finished jobs, by final
        state: seconds after a job finished (0: at the next prune),
        ``"forever"``, or None (the server's default). Stored with the queue
        and followed by every process's prune, for jobs that finished before
        too."""
        body = {"succeeded": _keep(succeeded), "dead": _keep(dead), "cancelled": _keep(cancelled)}
        return _read(QueueRetention, self._call("PUT", f"/v1/queues/{_segment(queue)}/retention", body))

    def put_worker(self, worker_id: str, beat: Dict[str, Any]) -> Dict[str, Any]:
        """Sends a worker's heartbeat (:class:`~relay_client.Worker` does,
        every ``beat_every`` seconds): ``name``, ``host``, ``pid``,
        ``queues``, ``concurrency``, ``version``, ``started_at`` (RFC 3339),
        ``beat_every_ms``, ``running`` (``[{"id", "token", "since"}]``) and,
        in its last, ``stopped``. ``worker_id`` is the worker's own (1-64 of
        A-Z a-z 0-9 _ . -), unique to its run. Send a ``secret`` of your own
        (1-128 characters) with every heartbeat of the id, from the first
        (or take the one the first answer holds when you sent none): a
        heartbeat without it, or with another, is refused
        (:class:`~relay_client.errors.Forbidden`), so no other client can
        write this worker's record."""
        return dict(self._call("PUT", f"/v1/workers/{_segment(worker_id)}", beat))

    def workers(self) -> List[Dict[str, Any]]:
        """Every worker seen in the last hour, by id: its ``state``
        (``alive``, ``gone``: its heartbeats stopped without a word, or
        ``stopped``), what it is, the jobs it runs (``running``) and, for a
        gone one, the leases it left ``orphaned`` until they expire."""
        out: List[Dict[str, Any]] = []
        after: Optional[str] = None
        while True:
            query = "" if after is None else "?after=" + urllib.parse.quote(after, safe="")
            page = self._call("GET", "/v1/workers" + query)
            out.extend(page["workers"])
            after = page.get("next")
            if after is None:
                return out

    def prune_from(self, after: int = 0) -> Dict[str, Any]:
        """One pass of the prune: deletes, with their events, the finished
        jobs past their retention among the 5,000 after job ``after``.
        Returns ``{"deleted": n, "next": id}``; ``next`` is None once the
        pass reached the last job."""
        return dict(self._call("POST", "/v1/prune", {"after": after}))

    def prune(self) -> int:
        """Deletes now every finished job past its retention, with its
        events, a pass at a time (the server also does this by itself);
        returns how many."""
        deleted, after = 0, 0
        while True:
            p = self.prune_from(after)
            deleted += int(p["deleted"])
            if p["next"] is None:
                return deleted
            after = int(p["next"])

    def schedules(self) -> List[Schedule]:
        """Every schedule of periodic jobs, by name."""
        return [_read(Schedule, v) for v in self._call("GET", "/v1/schedules")["schedules"]]

    def put_schedule(
        self,
        name: str,
        job: JobTemplate,
        *,
        cron: Optional[str] = None,
        tz: Optional[str] = None,
        every: Optional[float] = None,
    ) -> Schedule:
        """Adds the schedule ``name``, or replaces it (keeping its paused
        state): each tick of ``cron`` (in the IANA zone ``tz``, UTC by
        default) or of ``every`` seconds enqueues one ``job``, whichever
        process runs the scheduler."""
        body: Dict[str, Any] = {"job": job.body()}
        if cron is not None:
            body["cron"] = cron
        if tz is not None:
            body["tz"] = tz
        if every is not None:
            body["every_ms"] = _ms(every)
        return _read(Schedule, self._call("PUT", f"/v1/schedules/{_segment(name)}", body))

    def remove_schedule(self, name: str) -> bool:
        """Removes the schedule; True when there was one (else NotFound)."""
        return bool(self._call("DELETE", f"/v1/schedules/{_segment(name)}")["deleted"])

    def get_schedule(self, name: str) -> Schedule:
        """The schedule ``name``: its job, cron or interval, time zone, paused
        state, and next and latest tick. Raises :class:`NotFound` when no
        schedule has that name."""
        return _read(Schedule, self._call("GET", f"/v1/schedules/{_segment(name)}"))

    def pause_schedule(self, name: str) -> Schedule:
        """Pauses the schedule: its ticks enqueue nothing until resumed."""
        return _read(Schedule, self._call("POST", f"/v1/schedules/{_segment(name)}/pause", {}))

    def resume_schedule(self, name: str) -> Schedule:
        """Resumes the schedule from its next tick after now (ticks missed
        while paused enqueue nothing)."""
        return _read(Schedule, self._call("POST", f"/v1/schedules/{_segment(name)}/resume", {}))

    def health(self) -> Dict[str, Any]:
        """The server's health, without a token: ``{"status": "ok"}``, or
        ``"failing"`` with ``stopped``, ``error`` and ``since`` when its
        store takes no writes (then :meth:`health` returns, not raises)."""
        status, raw = self._send("GET", "/healthz")
        if status not in (200, 503):
            raise self._error("GET", "/healthz", status, raw)
        try:
            v = self._json("GET", "/healthz", status, raw)
        except RelayError:
            v = None
        if not isinstance(v, dict) or not isinstance(v.get("status"), str):
            raise RelayError(f"GET /healthz: HTTP {status}: not a Relay health answer: {raw[:200]!r}", status=status)
        return v

    def metrics(self) -> str:
        """The server's metrics, in Prometheus's text format."""
        status, raw = self._send("GET", "/metrics")
        if status >= 400:
            raise self._error("GET", "/metrics", status, raw)
        return raw.decode("utf-8", "replace")


# A bulk action is never cut off by the server; the client waits as long.
_NO_TIMEOUT = 24 * 3600.0


def _query(path: str, q: Dict[str, Any]) -> str:
    """``path`` with the parameters of ``q`` that are not None."""
    given = {k: v for k, v in q.items() if v is not None}
    return path + ("?" + urllib.parse.urlencode(given) if given else "")


def _segment(name: str) -> str:
    """A queue's or schedule's name as one path segment."""
    return urllib.parse.quote(name, safe="")
