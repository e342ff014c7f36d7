"""Python client and worker for Relay, the durable job queue.

Talks to ``relay serve`` over its HTTP API (standard library only)::

    from relay_client import Client, Worker

    client = Client("http://127.0.0.1:7433", token="secret")
    client.submit("emails", "send", {"to": "ada@example.com"})

    worker = Worker(client, ["emails"], concurrency=8)

    @worker.handler("send")
    def send(job):
        print("sending to", job.payload["to"])

    worker.run()  # until SIGTERM or SIGINT
"""

from .client import (
    Client,
    DeadGroup,
    Job,
    JobPage,
    JobTemplate,
    LeasedJob,
    LeaseExtension,
    LeaseRequest,
    NewJob,
    Outcome,
    OutcomeAnswer,
    QueueLimits,
    QueueRetention,
    Schedule,
    Submitted,
    WorkAnswer,
)
from .errors import (
    Busy,
    Conflict,
    Corrupt,
    DependencyNotFound,
    Forbidden,
    InvalidInput,
    InvalidRequest,
    InvalidState,
    LeaseLost,
    MaybeApplied,
    NotFound,
    PayloadTooLarge,
    RelayError,
    StepBound,
    Timeout,
    TokenClosed,
    TokenExpired,
    TokenUnknown,
    TokenUsed,
    TooManyWaiting,
    Unauthorized,
    Unavailable,
)
from .worker import AsyncJobContext, ChildFailed, Join, JobContext, Permanent, Retry, Sleep, Snooze, Stats, TimedOut, Token, Wait, Worker

__all__ = [
    "Busy",
    "Client",
    "Conflict",
    "Corrupt",
    "DeadGroup",
    "DependencyNotFound",
    "ChildFailed",
    "Forbidden",
    "InvalidInput",
    "InvalidRequest",
    "InvalidState",
    "Job",
    "Join",
    "AsyncJobContext",
    "JobContext",
    "JobPage",
    "JobTemplate",
    "LeaseExtension",
    "LeaseLost",
    "LeaseRequest",
    "LeasedJob",
    "MaybeApplied",
    "NewJob",
    "NotFound",
    "Outcome",
    "OutcomeAnswer",
    "PayloadTooLarge",
    "QueueLimits",
    "QueueRetention",
    "Permanent",
    "RelayError",
    "Retry",
    "Schedule",
    "Sleep",
    "Snooze",
    "Stats",
    "StepBound",
    "Submitted",
    "TimedOut",
    "Timeout",
    "Token",
    "TokenClosed",
    "TokenExpired",
    "TokenUnknown",
    "TokenUsed",
    "TooManyWaiting",
    "Unauthorized",
    "Unavailable",
    "Wait",
    "Worker",
    "WorkAnswer",
]
