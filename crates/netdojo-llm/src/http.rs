//! The HTTP side both wire formats share: the client, and how a failed exchange is described.

use std::time::Duration;

use serde_json::Value;

use crate::chat::ChatError;

/// A client with rustls (ring: no OpenSSL and no aws-lc C build), a connect timeout and a
/// whole-request timeout.
pub fn client(request_timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    // reqwest is built without a default crypto provider: install ring's. This fails only when
    // a provider is installed already, which serves as well.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(request_timeout.max(Duration::from_secs(1)))
        .build()
}

/// The message of an error body: OpenAI's `{"error": {"message"}}`, `{"error": "..."}`,
/// FastAPI's `{"detail": ...}`, or the text itself (cut).
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        let found = v
            .pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("detail"))
            .or_else(|| v.get("message"));
        if let Some(found) = found {
            return found.as_str().map(str::to_string).unwrap_or_else(|| found.to_string());
        }
    }
    let text = text.trim();
    if text.is_empty() { "(empty body)".into() } else { text.chars().take(500).collect() }
}

pub fn transport(url: &str, e: &reqwest::Error) -> ChatError {
    let mut message = if e.is_timeout() {
        "no answer in time".to_string()
    } else if e.is_connect() {
        "cannot connect".to_string()
    } else {
        "the request failed".to_string()
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    ChatError::Transport { url: url.into(), message }
}

pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64)
}
