//! What a call can fail with.

use crate::wire::ErrorCode;

/// A failed call.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with an error. `code` is stable (`not_found`,
    /// `lease_lost`, `invalid_state`, `invalid_input`, `conflict`, `busy`,
    /// `unauthorized`...; [`ErrorCode`] lists them), and the call changed
    /// nothing unless `code` is `maybe_applied`. An answer that is not
    /// Relay's has [`ErrorCode::Http`].
    #[error("{message} (server answered {status} {code})")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The error's code.
        code: ErrorCode,
        /// What went wrong, and what to do.
        message: String,
    },
    /// The server could not be reached, or the connection broke during the
    /// call. A write may or may not have been applied: read it back (or
    /// retry a submit that carries an idempotency key).
    #[error("cannot reach the server at {url}: {message}")]
    Transport {
        /// The server's base URL.
        url: String,
        /// What the connection reported.
        message: String,
    },
    /// The server's answer is not what this client understands (a proxy's
    /// page, or a server of another version). A write may have been applied.
    #[error("the server's answer is not understood: {0}")]
    Decode(String),
}

impl Error {
    /// The server's error code, when the server answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The HTTP status, when the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// What a failed send says, with what to do when the server closed the
/// connection while the request was still being sent: a server answers a
/// body far over its `--max-body` (more than 64 MiB) and closes, and the
/// rest of the request meets a closed socket.
#[cfg(any(feature = "blocking", feature = "async"))]
pub(crate) fn sending(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    let lower = text.to_ascii_lowercase();
    if lower.contains("broken pipe") || lower.contains("connection reset") {
        format!(
            "{text} (the server closed the connection while the request was being sent: \
             it may have refused a body over its --max-body, or stopped)"
        )
    } else {
        text
    }
}
