//! Secrets out of logs and traces (draft 002 §8): passwords, keys and SNMP communities in
//! configuration text are replaced by `<redacted>` before a line is logged.

use std::sync::LazyLock;

use regex::Regex;

static SECRET: LazyLock<Regex> = LazyLock::new(|| {
    // The word that introduces a secret, optional type digits (`password 7 ...`, `md5 ...`),
    // then the secret itself.
    #[allow(clippy::unwrap_used)] // a constant pattern, checked by the tests below
    Regex::new(
        r"(?i)\b(password|secret|authentication-key|message-digest-key\s+\d+\s+md5|community|key-string|key|psk)(\s+(?:[0-9]\s+)?)(\S+)",
    )
    .unwrap()
});

/// `text` with every secret replaced by `<redacted>`.
pub fn redact(text: &str) -> String {
    SECRET.replace_all(text, "$1$2<redacted>").into_owned()
}

/// A JSON value with every string redacted.
pub fn redact_json(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(redact(s)),
        Value::Array(a) => Value::Array(a.iter().map(redact_json).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), redact_json(v))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_the_rest_is_kept() {
        assert_eq!(redact("password zebra"), "password <redacted>");
        assert_eq!(redact("enable password 7 0822455D0A16"), "enable password 7 <redacted>");
        assert_eq!(redact(" ip ospf authentication-key s3cret"), " ip ospf authentication-key <redacted>");
        assert_eq!(
            redact(" ip ospf message-digest-key 1 md5 hunter2"),
            " ip ospf message-digest-key 1 md5 <redacted>"
        );
        assert_eq!(redact(" neighbor 10.0.0.2 password bgpsecret"), " neighbor 10.0.0.2 password <redacted>");
        assert_eq!(redact("snmp-server community public RO"), "snmp-server community <redacted> RO");
        assert_eq!(redact("ip route 10.0.0.0/8 10.0.12.2"), "ip route 10.0.0.0/8 10.0.12.2");
        let v = serde_json::json!({"commands": ["password x", "hostname R1"]});
        assert_eq!(redact_json(&v), serde_json::json!({"commands": ["password <redacted>", "hostname R1"]}));
    }
}
