//! Errors as JSON: `{"error": {"code": "lease_lost", "message": "..."}}`
//! with the status a client can act on. Bad input is never a 500.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

impl From<relay::Error> for ApiError {
    fn from(e: relay::Error) -> Self {
        use relay::Error as E;
        let (status, code) = match &e {
            E::NotFound { .. } | E::ScheduleNotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            E::DependencyNotFound { .. } => (StatusCode::NOT_FOUND, "dependency_not_found"),
            E::LeaseLost { .. } => (StatusCode::CONFLICT, "lease_lost"),
            E::InvalidState { .. } => (StatusCode::CONFLICT, "invalid_state"),
            E::Conflict { .. } => (StatusCode::CONFLICT, "conflict"),
            E::InvalidInput(_) => (StatusCode::BAD_REQUEST, "invalid_input"),
            E::Busy => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
            E::Closed => (StatusCode::SERVICE_UNAVAILABLE, "closed"),
            E::Corrupt { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "corrupt"),
            E::MaybeApplied(_) => (StatusCode::INTERNAL_SERVER_ERROR, "maybe_applied"),
            _ => (StatusCode::SERVICE_UNAVAILABLE, "storage"),
        };
        Self::new(status, code, e.to_string())
    }
}

/// `Json<T>` whose rejections are our JSON errors (400, or 413 for a body
/// over the limit) instead of axum's plain-text ones.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(rejection_error(&rejection)),
        }
    }
}

fn rejection_error(r: &JsonRejection) -> ApiError {
    if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "the request body is over the server's limit",
        );
    }
    let message = match r {
        JsonRejection::MissingJsonContentType(_) => {
            "send the body as JSON with `Content-Type: application/json`".to_owned()
        }
        other => format!("the body is not valid for this call: {}", other.body_text()),
    };
    ApiError::bad_request(message)
}
