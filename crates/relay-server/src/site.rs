//! Where a request comes from, as a browser tells it: what keeps web
//! pages the operator visits away from a server without tokens (its API
//! and its dashboard).

use axum::http::{header, HeaderMap};

/// A request another site made the browser send: its `Origin` is not this
/// server's, or the browser says it is cross-site.
pub(crate) fn cross_site(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if site != "same-origin" && site != "none" {
            return true;
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
        let origin = origin.to_str().unwrap_or("null");
        let same = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|o| !host.is_empty() && o == host);
        return !same;
    }
    false
}

/// Whether a request names this server by a loopback name (`localhost`,
/// `127.x.x.x`, `[::1]`). Without tokens the server listens on loopback
/// only; a page reached under any other name came through DNS rebinding
/// (another site's name pointed at 127.0.0.1), and is refused.
pub(crate) fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
