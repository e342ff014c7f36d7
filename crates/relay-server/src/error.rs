//! Errors as JSON: `{"error": {"code": "lease_lost", "message": "..."}}`
//! with the status a client can act on. Bad input is never a 500.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use relay_client::wire::ErrorCode;
use serde::de::DeserializeOwned;

/// A call refused: the HTTP status, the code and the message the server
/// answers it with (`{"error": {"code", "message"}}`), and what
/// [`crate::Local::call`] returns.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// 400, 401, 404, 409, 413, 429 or 503.
    pub status: StatusCode,
    /// Stable: what to branch on.
    pub code: ErrorCode,
    /// For people: what went wrong and what to do.
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code.as_str(), "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

impl From<relay::wire::RequestError> for ApiError {
    fn from(e: relay::wire::RequestError) -> Self {
        Self::bad_request(e.0)
    }
}

impl From<relay::Error> for ApiError {
    fn from(e: relay::Error) -> Self {
        use relay::Error as E;
        let (status, code) = match &e {
            E::NotFound { .. } | E::ScheduleNotFound { .. } => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            E::DependencyNotFound { .. } => (StatusCode::NOT_FOUND, ErrorCode::DependencyNotFound),
            E::LeaseLost { .. } => (StatusCode::CONFLICT, ErrorCode::LeaseLost),
            E::InvalidState { .. } => (StatusCode::CONFLICT, ErrorCode::InvalidState),
            E::Conflict { .. } => (StatusCode::CONFLICT, ErrorCode::Conflict),
            E::StepBound { .. } => (StatusCode::CONFLICT, ErrorCode::StepBound),
            E::Token { refusal } => match refusal {
                relay::TokenRefusal::Used => (StatusCode::CONFLICT, ErrorCode::TokenUsed),
                relay::TokenRefusal::Expired => (StatusCode::GONE, ErrorCode::TokenExpired),
                relay::TokenRefusal::Closed => (StatusCode::CONFLICT, ErrorCode::TokenClosed),
                _ => (StatusCode::NOT_FOUND, ErrorCode::TokenUnknown),
            },
            E::InvalidInput(_) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidInput),
            E::WorkerTaken { .. } => (StatusCode::FORBIDDEN, ErrorCode::Forbidden),
            E::Busy => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Busy),
            E::Closed => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Closed),
            E::Corrupt { .. } => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Corrupt),
            E::MaybeApplied(_) => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::MaybeApplied),
            _ => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Storage),
        };
        Self::new(status, code, e.to_string())
    }
}

/// `Json<T>` whose rejections are our JSON errors (400, or 413 for a body
/// over the limit) instead of axum's plain-text ones. The body must be a
/// JSON object, as every request body of the API is: serde would read a
/// struct from an array too (`[]` as every field left out).
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !json_content_type(req.headers()) {
            return Err(ApiError::bad_request(
                "send the body as JSON with `Content-Type: application/json`",
            ));
        }
        let body = axum::body::Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large()
            } else {
                ApiError::bad_request(format!("the body could not be read: {}", r.body_text()))
            }
        })?;
        if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        match Json::<T>::from_bytes(&body) {
            Ok(Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(rejection_error(&rejection)),
        }
    }
}

/// `application/json`, or another JSON type (`application/problem+json`),
/// as axum's `Json` takes.
fn json_content_type(headers: &axum::http::HeaderMap) -> bool {
    let Some(v) = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = v.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::PayloadTooLarge,
        "the request body is over the server's limit",
    )
}

fn rejection_error(r: &JsonRejection) -> ApiError {
    if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return too_large();
    }
    let message = match r {
        JsonRejection::MissingJsonContentType(_) => {
            "send the body as JSON with `Content-Type: application/json`".to_owned()
        }
        other => format!("the body is not valid for this call: {}", other.body_text()),
    };
    ApiError::bad_request(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 39, item 7: a failed commit (a full disk, a failed fsync)
    /// answered `maybe_applied` with 500 where the README and the
    /// OpenAPI document say 503, the status of every "try again after
    /// reading back" answer. Seen failing: 500.
    #[test]
    fn a_failed_commit_is_503_maybe_applied() {
        let e = relay::Error::MaybeApplied(std::sync::Arc::new(relay::StoreError::Full {
            message: "no space left on device".into(),
            source: "ENOSPC".into(),
        }));
        let api = ApiError::from(e);
        assert_eq!(
            (api.status, api.code),
            (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::MaybeApplied)
        );
    }
}
