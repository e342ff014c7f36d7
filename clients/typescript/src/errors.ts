/**
 * Errors: one class per error code of Relay's HTTP API. Every error the
 * server answers is `{"error": {"code", "message"}}`; the client throws the
 * class named after its code (`lease_lost` -> `LeaseLost`), all subclasses
 * of `RelayError`. A server that cannot be reached throws `Unavailable`.
 */

export class RelayError extends Error {
  /** The API's error code. */
  readonly code: string;
  /** The HTTP status, or `undefined` when the server did not answer. */
  readonly status?: number;

  constructor(message: string, code = "error", status?: number) {
    super(status === undefined ? `${message} (${code})` : `${message} (HTTP ${status}, ${code})`);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}

/** The request is malformed (not JSON, a missing or unknown field). */
export class InvalidRequest extends RelayError {}
/** A value breaks a limit (a queue name, a priority, a payload size). */
export class InvalidInput extends RelayError {}
/** No token, or a token the server does not know. */
export class Unauthorized extends RelayError {}
/** The token is known but may not make this call. */
export class Forbidden extends RelayError {}
/** The server gave up on the request in time (retry). */
export class Timeout extends RelayError {}
/** No such job (or schedule). */
export class NotFound extends RelayError {}
/** A job named in `dependsOn` does not exist; nothing was submitted. */
export class DependencyNotFound extends RelayError {}
/** The lease token is not the job's current valid one: drop the job. */
export class LeaseLost extends RelayError {}
/** The job's state does not allow the call (e.g. an ack of a CANCELLED job). */
export class InvalidState extends RelayError {}
/** Another unfinished job holds the unique key. */
export class Conflict extends RelayError {}
/** A step record would take the job past its 1,000 steps or 1 MiB of output; nothing was recorded. */
export class StepBound extends RelayError {}
/** No completion token has this id and secret. */
export class TokenUnknown extends RelayError {}
/** The completion token was completed already; the first completion stands. */
export class TokenUsed extends RelayError {}
/** The completion token expired: its job stopped waiting. */
export class TokenExpired extends RelayError {}
/** The completion token's job has ended: nothing waits for it. */
export class TokenClosed extends RelayError {}
/** The request body is over the server's limit. */
export class PayloadTooLarge extends RelayError {}
/** Too many long-polls are waiting on the server; retry shortly. */
export class TooManyWaiting extends RelayError {}
/** The store is busy; retry. */
export class Busy extends RelayError {}
/** The server could not be reached, or is shutting down or failing; retry. */
export class Unavailable extends RelayError {}
/** The change may or may not have been committed. */
export class MaybeApplied extends RelayError {}
/** A stored row does not decode; the message names the job. */
export class Corrupt extends RelayError {}

const byCode: Record<string, new (message: string, code?: string, status?: number) => RelayError> = {
  invalid_request: InvalidRequest,
  invalid_input: InvalidInput,
  unauthorized: Unauthorized,
  forbidden: Forbidden,
  timeout: Timeout,
  not_found: NotFound,
  dependency_not_found: DependencyNotFound,
  lease_lost: LeaseLost,
  invalid_state: InvalidState,
  conflict: Conflict,
  step_bound: StepBound,
  token_unknown: TokenUnknown,
  token_used: TokenUsed,
  token_expired: TokenExpired,
  token_closed: TokenClosed,
  payload_too_large: PayloadTooLarge,
  too_many_waiting: TooManyWaiting,
  busy: Busy,
  closed: Unavailable,
  storage: Unavailable,
  maybe_applied: MaybeApplied,
  corrupt: Corrupt,
};

/** The error for an error answer (`status` undefined: one item of a batch call's answer). */
export function errorFor(status: number | undefined, code: string, message: string): RelayError {
  const Cls = byCode[code] ?? RelayError;
  return new Cls(message, code, status);
}
