"""Errors: one exception per error code of Relay's HTTP API.

Every error the server answers is ``{"error": {"code": ..., "message": ...}}``;
the client raises the class named after its code (``lease_lost`` ->
:class:`LeaseLost`), all subclasses of :class:`RelayError`. A server that
cannot be reached raises :class:`Unavailable` (``code == "unreachable"``).
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class RelayError(Exception):
    """An error answered by Relay (or the lack of an answer).

    ``code`` is the API's error code, ``status`` the HTTP status (``None``
    when the server could not be reached), ``message`` the server's text,
    which says what to do next.
    """

    code = "error"

    def __init__(self, message: str, status: Optional[int] = None, code: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.status = status
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        where = f"HTTP {self.status}, " if self.status is not None else ""
        return f"{self.message} ({where}{self.code})"


class InvalidRequest(RelayError):
    """The request is malformed (not JSON, a missing or unknown field)."""

    code = "invalid_request"


class InvalidInput(RelayError):
    """A value breaks a limit (a queue name, a priority, a payload size)."""

    code = "invalid_input"


class Unauthorized(RelayError):
    """No token, or a token the server does not know."""

    code = "unauthorized"


class Forbidden(RelayError):
    """The token is known but may not make this call (HTTP 403)."""

    code = "forbidden"


class NotFound(RelayError):
    """No such job (or schedule)."""

    code = "not_found"


class DependencyNotFound(RelayError):
    """A job named in ``depends_on`` does not exist; nothing was submitted."""

    code = "dependency_not_found"


class LeaseLost(RelayError):
    """The lease token is not the job's current valid one: drop the job,
    another worker may hold it."""

    code = "lease_lost"


class InvalidState(RelayError):
    """The job's state does not allow the call (e.g. an ack of a CANCELLED job)."""

    code = "invalid_state"


class Conflict(RelayError):
    """Another unfinished job holds the unique key."""

    code = "conflict"


class StepBound(RelayError):
    """A step record would take the job past its 1,000 steps or 1 MiB of
    step output; nothing was recorded."""

    code = "step_bound"


class PayloadTooLarge(RelayError):
    """The request body is over the server's limit."""

    code = "payload_too_large"


class TooManyWaiting(RelayError):
    """Too many long-polls are waiting on the server; retry shortly."""

    code = "too_many_waiting"


class Busy(RelayError):
    """The store is busy (another process holds its write lock); retry."""

    code = "busy"


class Timeout(RelayError):
    """The server gave up on the call in time (e.g. a statement timeout); retry."""

    code = "timeout"


class TokenUnknown(RelayError):
    """No completion token has this id and secret (HTTP 404)."""

    code = "token_unknown"


class TokenUsed(RelayError):
    """The completion token was completed already; the first completion
    stands (HTTP 409)."""

    code = "token_used"


class TokenExpired(RelayError):
    """The completion token expired: its job stopped waiting (HTTP 410)."""

    code = "token_expired"


class TokenClosed(RelayError):
    """The completion token's job has ended: nothing waits for it (HTTP 409)."""

    code = "token_closed"


class Unavailable(RelayError):
    """The server could not be reached, or is shutting down or failing; retry."""

    code = "unreachable"


class MaybeApplied(RelayError):
    """The change may or may not have been committed (a failed commit)."""

    code = "maybe_applied"


class Corrupt(RelayError):
    """A stored row does not decode; the message names the job."""

    code = "corrupt"


_BY_CODE: Dict[str, Type[RelayError]] = {
    cls.code: cls
    for cls in [
        InvalidRequest,
        InvalidInput,
        Unauthorized,
        Forbidden,
        NotFound,
        DependencyNotFound,
        LeaseLost,
        InvalidState,
        Conflict,
        StepBound,
        TokenUnknown,
        TokenUsed,
        TokenExpired,
        TokenClosed,
        PayloadTooLarge,
        TooManyWaiting,
        Timeout,
        Busy,
        MaybeApplied,
        Corrupt,
    ]
}
_BY_CODE["closed"] = Unavailable
_BY_CODE["storage"] = Unavailable


def error_for(status: Optional[int], code: str, message: str) -> RelayError:
    """The exception for an error answer (``status`` None: one item's error
    inside a batch answer, which has no status of its own)."""
    cls = _BY_CODE.get(code, RelayError)
    return cls(message, status=status, code=code)
