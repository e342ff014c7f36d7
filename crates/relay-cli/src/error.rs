//! The failure of one command, and the exit status it maps to.

use relay::Error;
use relay_client::wire::ErrorCode;
use std::fmt;

/// A failure of one command, with the exit status it maps to.
#[derive(Debug, Clone)]
pub enum CliError {
    Relay(Error),
    Usage(String),
    /// A file or a connection failed (for a server: it did not answer).
    Io(String),
    /// A server answered with something this build does not understand
    /// (another version, a proxy): the call may have been applied.
    Answer(String),
    /// A call on a database file, refused (the same code and message a
    /// server answers it with).
    Refused {
        code: ErrorCode,
        message: String,
    },
    /// A server's error answer.
    Remote {
        status: u16,
        code: ErrorCode,
        message: String,
    },
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        Self::Relay(e)
    }
}

/// A request that does not fit its call (a time or a duration out of
/// range): refused before anything was sent or done, as a usage error.
impl From<relay::wire::RequestError> for CliError {
    fn from(e: relay::wire::RequestError) -> Self {
        Self::Usage(e.0)
    }
}

/// A call run in this process, refused as a server would refuse it: its
/// code says the exit status, its message what to do.
impl From<relay_server::ApiError> for CliError {
    fn from(e: relay_server::ApiError) -> Self {
        Self::Refused {
            code: e.code,
            message: e.message,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Relay(e) => write!(f, "{e}"),
            Self::Usage(m) | Self::Io(m) | Self::Answer(m) | Self::Refused { message: m, .. } => f.write_str(m),
            Self::Remote { status, message, .. } => write!(f, "{message} (server answered {status})"),
        }
    }
}

impl std::error::Error for CliError {}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) | Self::Relay(Error::InvalidInput(_)) => 2,
            Self::Relay(Error::NotFound { .. } | Error::ScheduleNotFound { .. } | Error::DependencyNotFound { .. }) => {
                3
            }
            Self::Relay(Error::LeaseLost { .. }) => 4,
            Self::Relay(Error::InvalidState { .. } | Error::Conflict { .. } | Error::StepBound { .. }) => 5,
            Self::Remote { code, .. } | Self::Refused { code, .. } => match code {
                ErrorCode::InvalidInput | ErrorCode::InvalidRequest => 2,
                ErrorCode::NotFound | ErrorCode::DependencyNotFound => 3,
                ErrorCode::LeaseLost => 4,
                ErrorCode::InvalidState | ErrorCode::Conflict | ErrorCode::StepBound => 5,
                _ => 1,
            },
            _ => 1,
        }
    }
}
