"""A worker: runs handlers by job kind on a thread pool, over Relay's HTTP API.

- One thread leases (a long-poll) as many jobs as there are idle handler
  threads; each job runs on its own thread.
- While a handler runs, a heartbeat extends its lease every third of the
  lease's length; a lease found lost stops the heartbeat and the handler's
  outcome is dropped (another worker may hold the job).
- A handler that returns acks the job (its return value is the result); one
  that raises nacks it with the exception and its traceback as the error
  (:class:`Retry` sets the delay, :class:`Permanent` makes it DEAD at once,
  :class:`Snooze` puts it back for later without spending an attempt).
- SIGTERM or SIGINT (or :meth:`Worker.stop`) stops leasing, lets running
  handlers finish for ``grace`` seconds and releases the jobs still running
  after that, so another worker takes them at once.
- A server that cannot be reached is retried with back-off (up to 30 s),
  said once per outage on stderr; the worker does not crash.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

from .client import Client, LeasedJob
from .errors import InvalidState, LeaseLost, RelayError, Unavailable

Handler = Callable[[LeasedJob], Any]


class Retry(Exception):
    """Raise from a handler to fail the attempt and retry after ``delay`` seconds."""

    def __init__(self, message: str, delay: float):
        super().__init__(message)
        self.delay = delay


class Permanent(Exception):
    """Raise from a handler to fail the job for good (DEAD, no more attempts)."""


class Snooze(Exception):
    """Raise from a handler to put the job back for ``delay`` seconds without
    counting the attempt (not a failure: "not yet")."""

    def __init__(self, delay: float):
        super().__init__(f"snoozed for {delay} s")
        self.delay = delay


@dataclass
class Stats:
    succeeded: int = 0
    failed: int = 0
    snoozed: int = 0
    released: int = 0
    lost: int = 0


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
        self.stats = Stats()
        self._handlers: Dict[str, Handler] = {}
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._idle = threading.Semaphore(concurrency)
        self._running: Dict[int, LeasedJob] = {}
        self._threads: List[threading.Thread] = []

    def handler(self, kind: str) -> Callable[[Handler], Handler]:
        """Registers the decorated function for jobs of ``kind``."""

        def register(f: Handler) -> Handler:
            self._handlers[kind] = f
            return f

        return register

    def stop(self) -> None:
        """Stops leasing; :meth:`run` returns once running jobs are settled."""
        self._stopping.set()

    def run(self) -> Stats:
        """Leases and runs jobs until stopped; returns what happened."""
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        backoff = 0.5
        outage = False
        while not self._stopping.is_set():
            if not self._idle.acquire(timeout=0.2):
                continue
            free = 1
            while free < self.concurrency and self._idle.acquire(blocking=False):
                free += 1
            try:
                jobs = self.client.lease(
                    self.queues, max=free, lease_for=self.lease_for, wait=self.poll_wait, worker=self.name
                )
                if outage:
                    print(f"relay worker: {self.client.url} answers again", file=sys.stderr)
                outage, backoff = False, 0.5
            except (Unavailable, RelayError) as e:
                for _ in range(free):
                    self._idle.release()
                if not outage:
                    print(f"relay worker: cannot lease ({e}); retrying with back-off", file=sys.stderr)
                outage = True
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            for _ in range(free - len(jobs)):
                self._idle.release()
            for job in jobs:
                t = threading.Thread(target=self._run_one, args=(job,), daemon=True)
                with self._lock:
                    self._running[job.id] = job
                    self._threads.append(t)
                t.start()
        self._drain()
        return self.stats

    def _drain(self) -> None:
        deadline = time.monotonic() + self.grace
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            left = list(self._running.values())
            self._running.clear()
        for job in left:
            try:
                self.client.release(job.id, job.token)
                self._count("released")
            except RelayError:
                pass

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self.stats, what, getattr(self.stats, what) + 1)

    def _owned(self, job: LeasedJob) -> bool:
        """Takes the job out of the running set; False when the drain
        already released it (its outcome is then dropped)."""
        with self._lock:
            return self._running.pop(job.id, None) is not None

    def _run_one(self, job: LeasedJob) -> None:
        lost = threading.Event()
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(job, done, lost), daemon=True)
        beat.start()
        try:
            handler = self._handlers.get(job.kind)
            if handler is None:
                outcome = ("dead", f"no handler for kind {job.kind!r} on this worker (queues: {', '.join(self.queues)})")
            else:
                try:
                    outcome = ("ack", handler(job))
                except Snooze as s:
                    outcome = ("snooze", s.delay)
                except Retry as r:
                    outcome = ("retry", (f"{r}\n{traceback.format_exc()}", r.delay))
                except Permanent as p:
                    outcome = ("dead", f"{p}\n{traceback.format_exc()}")
                except Exception as e:  # noqa: BLE001 - any failure of the handler nacks the job
                    outcome = ("retry", (f"{type(e).__name__}: {e}\n{traceback.format_exc()}", None))
            done.set()
            beat.join()
            if lost.is_set() or not self._owned(job):
                self._count("lost")
                return
            self._settle(job, outcome)
        finally:
            done.set()
            self._idle.release()

    def _settle(self, job: LeasedJob, outcome: Any) -> None:
        what, value = outcome
        try:
            if what == "ack":
                self.client.ack(job.id, job.token, value)
                self._count("succeeded")
            elif what == "snooze":
                self.client.release(job.id, job.token, in_=value)
                self._count("snoozed")
            elif what == "dead":
                self.client.nack(job.id, job.token, value, permanent=True)
                self._count("failed")
            else:
                error, delay = value
                self.client.nack(job.id, job.token, error, retry_in=delay)
                self._count("failed")
        except (LeaseLost, InvalidState):
            self._count("lost")
        except RelayError as e:
            print(f"relay worker: job {job.id}: could not report its outcome ({e}); its lease will expire", file=sys.stderr)

    def _heartbeat(self, job: LeasedJob, done: threading.Event, lost: threading.Event) -> None:
        lease = job.lease_for_ms / 1000.0
        while not done.wait(lease / 3):
            try:
                self.client.extend(job.id, job.token, lease)
            except (LeaseLost, InvalidState):
                lost.set()
                return
            except RelayError:
                continue  # the server is away: try again at the next beat
