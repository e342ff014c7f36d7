//! The dashboard's sessions and CSRF tokens.
//!
//! A session is a cookie, `relay_session=<expiry>.<nonce>.<mac>`: the
//! expiry (Unix seconds) and a random nonce, signed with HMAC-SHA256 under
//! one of the server's tokens. So a
//! session needs no table: it survives a restart and is good on every server
//! that shares the token, and removing a token ends every session it signed.
//! A server without tokens (loopback only) signs with a random key of its
//! own, made at start; its sessions end with the process.
//!
//! Logging out ends a session on the server side too: its MAC is kept as
//! a mark in the store (`session-ended:<mac>`, until the session would
//! have expired), which every server on the store reads, across restarts.
//!
//! A page's forms carry a CSRF token, the HMAC of the session cookie under
//! the same key: a cross-site page can neither read the cookie (HttpOnly)
//! nor the token, and a `SameSite=Strict` cookie is not sent with its
//! requests anyway.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "relay_session";
/// How long a session lasts after its login.
pub(crate) const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// The keys sessions are signed with.
pub(crate) struct Keys {
    keys: Vec<Vec<u8>>,
    /// The server has tokens: a browser logs in with one.
    pub login_required: bool,
    /// Cookies carry `Secure`: browsers send them over HTTPS only (a
    /// server behind a TLS proxy).
    pub secure: bool,
}

/// A valid session: its cookie value and the key that signed it.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    key: usize,
    value: String,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Keys {
    pub fn new(tokens: &[String]) -> Result<Self, String> {
        if tokens.is_empty() {
            let mut key = vec![0u8; 32];
            getrandom::fill(&mut key).map_err(|e| format!("no random key for dashboard sessions: {e}"))?;
            return Ok(Self {
                keys: vec![key],
                login_required: false,
                secure: false,
            });
        }
        Ok(Self {
            keys: tokens.iter().map(|t| t.as_bytes().to_vec()).collect(),
            login_required: true,
            secure: false,
        })
    }

    fn mac(&self, key: usize, purpose: &str, message: &str) -> HmacSha256 {
        // Any key length is valid for HMAC; `new_from_slice` cannot fail.
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.keys[key])
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(message.as_bytes());
        mac
    }

    /// A new session signed with `key` (the token that logged in): its
    /// expiry and a random nonce (two sessions started in the same second
    /// are two sessions, with CSRF tokens of their own), signed.
    pub fn issue(&self, key: usize) -> Session {
        let expires = now_secs() + LIFETIME.as_secs();
        let mut nonce = [0u8; 16];
        // No randomness: the expiry alone still signs a valid session; its
        // CSRF token is then shared with sessions of the same second.
        if getrandom::fill(&mut nonce).is_err() {
            tracing::warn!("no randomness for a dashboard session's nonce");
        }
        let body = format!("{expires}.{}", URL_SAFE_NO_PAD.encode(nonce));
        let mac = self.mac(key, "session", &body).finalize().into_bytes();
        Session {
            key,
            value: format!("{body}.{}", URL_SAFE_NO_PAD.encode(mac)),
        }
    }

    /// The session a cookie value holds, if it is unexpired and signed by
    /// one of the keys.
    pub fn verify(&self, value: &str) -> Option<Session> {
        let (body, mac) = value.rsplit_once('.')?;
        let (expires, _nonce) = body.split_once('.')?;
        let at: u64 = expires.parse().ok()?;
        let now = now_secs();
        if at <= now || at > now + LIFETIME.as_secs() + 60 {
            return None;
        }
        let mac = URL_SAFE_NO_PAD.decode(mac).ok()?;
        (0..self.keys.len())
            .find(|&k| self.mac(k, "session", body).verify_slice(&mac).is_ok())
            .map(|key| Session {
                key,
                value: value.to_owned(),
            })
    }

    /// The CSRF token of a session's forms.
    pub fn csrf(&self, s: &Session) -> String {
        URL_SAFE_NO_PAD.encode(self.mac(s.key, "csrf", &s.value).finalize().into_bytes())
    }

    /// Whether `given` is the session's CSRF token (compared in constant time).
    pub fn csrf_ok(&self, s: &Session, given: &str) -> bool {
        URL_SAFE_NO_PAD
            .decode(given)
            .is_ok_and(|mac| self.mac(s.key, "csrf", &s.value).verify_slice(&mac).is_ok())
    }

    /// Which token `given` is (each compared in constant time), for a login.
    pub fn login(&self, given: &str) -> Option<usize> {
        if !self.login_required {
            return None;
        }
        let mut found = None;
        for (i, k) in self.keys.iter().enumerate() {
            if bool::from(given.as_bytes().ct_eq(k)) {
                found = Some(i);
            }
        }
        found
    }
}

impl Session {
    /// The `Set-Cookie` value that stores this session in the browser.
    pub fn set_cookie(&self, keys: &Keys) -> String {
        format!(
            "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
            self.value,
            LIFETIME.as_secs(),
            if keys.secure { "; Secure" } else { "" }
        )
    }

    /// The mark that says this session was logged out: keyed by the
    /// cookie's MAC, unique to the session even without a random nonce.
    pub fn ended_mark(&self) -> String {
        let mac = self.value.rsplit('.').next().unwrap_or_default();
        format!("session-ended:{mac}")
    }

    /// How long the session has left (what its ended mark must outlast).
    pub fn left(&self) -> Duration {
        let expires: u64 = self.value.split('.').next().and_then(|e| e.parse().ok()).unwrap_or(0);
        Duration::from_secs(expires.saturating_sub(now_secs()) + 60)
    }
}

/// The `Set-Cookie` value that ends a session.
pub(crate) fn clear_cookie(keys: &Keys) -> String {
    format!(
        "{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if keys.secure { "; Secure" } else { "" }
    )
}

/// The session cookie's value among a request's cookies.
pub(crate) fn cookie(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_verifies_under_its_token_only() {
        let keys = Keys::new(&["alpha".into(), "beta".into()]).unwrap();
        let s = keys.issue(1);
        let back = keys.verify(&s.value).unwrap();
        assert_eq!(back.key, 1);
        let other = Keys::new(&["alpha".into()]).unwrap();
        assert!(other.verify(&s.value).is_none(), "a removed token's sessions end");
        // Tampering with the expiry breaks the signature.
        let (exp, rest) = s.value.split_once('.').unwrap();
        let earlier: u64 = exp.parse::<u64>().unwrap() - 10;
        assert!(keys.verify(&format!("{earlier}.{rest}")).is_none());
        assert!(keys.verify("garbage").is_none());
        assert!(keys.verify("1.AAAA.AAAA").is_none(), "expired");
        assert_ne!(keys.issue(1).value, keys.issue(1).value, "each session its own");
    }

    #[test]
    fn csrf_tokens_belong_to_one_session() {
        let keys = Keys::new(&[]).unwrap();
        let a = keys.issue(0);
        let b = Session {
            key: 0,
            value: format!("{}x", a.value),
        };
        let t = keys.csrf(&a);
        assert!(keys.csrf_ok(&a, &t));
        assert!(!keys.csrf_ok(&b, &t));
        assert!(!keys.csrf_ok(&a, ""));
        assert!(keys.login("anything").is_none(), "no tokens: no login");
    }
}
