"""A client of Relay's HTTP API (``relay serve``), standard library only.

Payloads and results are bytes on the server, JSON by convention. A JSON
value given here (a dict, list, str, number, bool) is sent as JSON and comes
back as that value; ``bytes`` are sent as base64 and come back as ``bytes``;
``None`` is no payload.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from .errors import RelayError, Unavailable, error_for

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

    @classmethod
    def from_json(cls, v: Dict[str, Any]) -> "LeasedJob":
        return cls(
            id=v["id"],
            token=v["token"],
            queue=v["queue"],
            kind=v["kind"],
            priority=v["priority"],
            attempt=v["attempt"],
            max_attempts=v["max_attempts"],
            lease_expires_at=v["lease_expires_at"],
            lease_for_ms=v.get("lease_for_ms", 30_000),
            timeout_ms=v.get("timeout_ms"),
            payload=_get_payload(v, "payload"),
            traceparent=v.get("traceparent"),
        )


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
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, v: Dict[str, Any]) -> "Job":
        return cls(
            id=v["id"],
            queue=v["queue"],
            kind=v["kind"],
            state=v["state"],
            priority=v["priority"],
            attempts=v["attempts"],
            max_attempts=v["max_attempts"],
            last_error=v.get("last_error"),
            payload=_get_payload(v, "payload"),
            result=_get_payload(v, "result"),
            waiting_on=v.get("waiting_on", 0),
            traceparent=v.get("traceparent"),
            tags=list(v.get("tags") or []),
            raw=v,
        )


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

    def body(self) -> Dict[str, Any]:
        b: Dict[str, Any] = {"queue": self.queue, "kind": self.kind}
        _put_payload(b, "payload", self.payload)
        for key, value in [
            ("priority", self.priority),
            ("delay_ms", _ms(self.delay)),
            ("run_at", self.run_at),
            ("max_attempts", self.max_attempts),
            ("unique_key", self.unique_key),
            ("lease_for_ms", _ms(self.lease_for)),
            ("timeout_ms", _ms(self.timeout)),
            ("depends_on", list(self.depends_on) if self.depends_on else None),
            ("on_dependency_failure", self.on_dependency_failure),
            ("traceparent", self.traceparent),
            ("tags", list(self.tags) if self.tags else None),
        ]:
            if value is not None:
                b[key] = value
        return b


class Client:
    """Relay's HTTP API. Thread-safe: every call is its own request.

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

    # -- plumbing --------------------------------------------------------

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None, timeout: Optional[float] = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
                raise error_for(e.code, err["code"], err["message"]) from None
            except (ValueError, KeyError, TypeError):
                raise RelayError(
                    f"{method} {path}: HTTP {e.code} without a Relay error body: {raw[:200]!r}",
                    status=e.code,
                ) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise Unavailable(
                f"cannot reach Relay at {self.url} ({reason}); is `relay serve` running there?"
            ) from None
        return json.loads(raw) if raw else None

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
    ) -> int:
        """Submits one job; returns its id (for a ``unique_key`` an
        unfinished job holds, that job's id). Durable when it returns."""
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
        )
        return int(self._call("POST", "/v1/jobs", job.body())["id"])

    def submit_batch(self, jobs: Iterable[NewJob]) -> List[int]:
        """Submits 1-10,000 jobs in one call, all or none; returns their ids."""
        body = {"jobs": [j.body() for j in jobs]}
        return [int(i) for i in self._call("POST", "/v1/jobs/batch", body)["ids"]]

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
        """Reports failure: READY again after ``retry_in`` (or the back-off),
        DEAD when attempts are spent or ``permanent``. Returns the state."""
        body: Dict[str, Any] = {"token": token, "error": error, "permanent": permanent}
        if retry_in is not None:
            body["retry_in_ms"] = _ms(retry_in)
        return self._call("POST", f"/v1/jobs/{id}/nack", body)

    def extend(self, id: int, token: int, lease_for: float = 30.0) -> str:
        """Extends the lease to ``lease_for`` from now; returns the new expiry."""
        v = self._call("POST", f"/v1/jobs/{id}/extend", {"token": token, "lease_for_ms": _ms(lease_for)})
        return str(v["lease_expires_at"])

    def release(self, id: int, token: int, *, in_: Optional[float] = None) -> None:
        """Gives the job back untried (no attempt counted); with ``in_``, it
        is READY again only after that many seconds (a snooze)."""
        body: Dict[str, Any] = {"token": token}
        if in_ is not None:
            body["in_ms"] = _ms(in_)
        self._call("POST", f"/v1/jobs/{id}/release", body)

    # -- operating -------------------------------------------------------

    def cancel(self, id: int) -> None:
        self._call("POST", f"/v1/jobs/{id}/cancel", {})

    def retry(self, id: int) -> None:
        self._call("POST", f"/v1/jobs/{id}/retry", {})

    def delete(self, id: int) -> None:
        self._call("DELETE", f"/v1/jobs/{id}")

    def get(self, id: int) -> Job:
        return Job.from_json(self._call("GET", f"/v1/jobs/{id}"))

    def events(self, id: int) -> List[Dict[str, Any]]:
        """The job's event log, oldest first."""
        return list(self._call("GET", f"/v1/jobs/{id}/events")["events"])

    def append_event(self, id: int, kind: str, data: JSONValue = None) -> int:
        """Appends an event of your own to the job's log; returns its number."""
        body = {"kind": kind, "data": {} if data is None else data}
        return int(self._call("POST", f"/v1/jobs/{id}/events", body)["seq"])

    def stats(self) -> Dict[str, Any]:
        """Counts of every queue's jobs by state, and its settings."""
        return dict(self._call("GET", "/v1/stats")["queues"])

    def jobs(self, *, queue: Optional[str] = None, state: Optional[str] = None, limit: int = 100) -> List[Job]:
        """The newest jobs, filtered by queue and state."""
        q = {k: v for k, v in {"queue": queue, "state": state, "limit": limit}.items() if v is not None}
        v = self._call("GET", "/v1/jobs?" + urllib.parse.urlencode(q))
        return [Job.from_json(j) for j in v["jobs"]]
