//! Secrets out of what the server sends and logs (draft 002 §8: passwords and SNMP
//! communities MUST be redacted in logs and MCP traces).
//!
//! Redaction knows the structure it redacts instead of guessing from a keyword:
//! - configuration text, line by line: each dialect's secret-bearing commands ([`RULES`]: FRR's
//!   and IOS's, and iproute2's IPsec and MACsec keys) name the word that is the secret, after
//!   the words that introduce it and an optional encryption type (`password 7 ...`); a rule
//!   never reaches across a line, and a `key` is a secret only in the blocks and lines where it
//!   is one (`tacacs server`, `radius-server ... key`), never a key chain's `key 1`. Keywords
//!   match by prefix as the CLIs accept them (`ip rip auth str SECRET`);
//! - JSON, by key: a leaf under a key that names a secret (`authentication-password`,
//!   `key-string`, `*-secret`, ...; [`secret_key`]) is replaced whatever its text; every other
//!   string is redacted as text, and an array of command strings as one configuration (so
//!   `["tacacs server T", " key S"]` keeps its block);
//! - log lines ([`LogWriter`]): the same rules over words split at JSON and Rust-debug
//!   punctuation, so that a request logged as `String("key-string S")` is caught too.
//!
//! A secret becomes [`REDACTED`]; the words around it stay, so that a reader still sees which
//! command set a secret.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// What a secret is replaced with.
pub const REDACTED: &str = "<redacted>";

/// The secret-bearing commands. A rule is a sequence of words:
/// - `word`: a keyword, matched case-insensitively by any prefix of two letters or more
///   (`=word`: only the whole word); `a|b`: either;
/// - `*`: any word;
/// - `#`: an optional encryption type (a digit, `clear`, `md5`, `text`, ...), taken only when
///   another word follows it;
/// - `$`: the secret, one word; `$$`: the secret to the end of the line (IOS passwords may hold
///   spaces; in a log line, to the end of its string);
/// - `@alg`: an iproute2 algorithm name (`hmac(sha256)`, `cbc(aes)`, `sha1`, ...).
///
/// At each word of a line the first rule that matches wins and its words are consumed, so a
/// rule without `$` keeps a non-secret (`pre-shared-key key-chain NAME`) away from the rules
/// after it. `when` restricts a rule to lines with a word, or to a block.
pub static RULES: &[Rule] = &[
    // IOS's `key config-key password-encrypt KEY`.
    Rule::always("password-encrypt $"),
    // NTP's key number is not the secret; the key after the algorithm is.
    Rule::always("ntp authentication-key * * # $"),
    Rule::always("secret level * # $$"),
    Rule::always("secret # $$"),
    Rule::always("password level * # $$"),
    // `password`, `enable password`, `neighbor ... password` (BGP, LDP), `isis password`,
    // `username ... password`, `ppp chap password`, `ip ftp password`, a line's `password`.
    Rule::always("password # $$"),
    Rule::always("area-password # $"),
    Rule::always("domain-password # $"),
    Rule::always("key-string # $"),
    // OSPF's interface and virtual-link keys.
    Rule::always("authentication-key # $"),
    Rule::always("message-digest-key * md5 # $"),
    Rule::always("rip authentication string $"),
    // OSPFv3's `ipv6 ospf6 authentication key-id N hash-algo ALG key KEY`.
    Rule::always("hash-algo * key $"),
    Rule::always("nhrp authentication $"),
    Rule::always("snmp-server community # $"),
    Rule::always("snmp-server host * informs|traps version 1|2c $"),
    Rule::always("snmp-server host * version 1|2c $"),
    // SNMPv3: the word is a user name, not a secret.
    Rule::always("snmp-server host * informs|traps version 3 * *"),
    Rule::always("snmp-server host * version 3 * *"),
    Rule::always("snmp-server host * informs|traps $"),
    Rule::always("snmp-server host * $"),
    Rule::always("v3 auth md5|sha # $"),
    Rule::always("priv aes 128|192|256 # $"),
    Rule::always("priv des|3des|aes # $"),
    Rule::always("tacacs-server|radius-server key # $"),
    Rule::line("tacacs-server|radius-server", "key # $"),
    Rule::block("tacacs|radius|aaa", "key # $"),
    Rule::always("server-key # $"),
    Rule::always("isakmp key # $"),
    Rule::always("pre-shared-key key-chain *"),
    Rule::always("pre-shared-key address|hostname * key # $"),
    Rule::always("pre-shared-key local|remote # $"),
    Rule::always("pre-shared-key # $"),
    Rule::always("standby|vrrp|glbp * authentication md5 key-chain *"),
    Rule::always("standby|vrrp|glbp * authentication md5 key-string # $"),
    Rule::always("standby|vrrp|glbp * authentication text $"),
    Rule::always("standby|vrrp|glbp * authentication $"),
    Rule::always("wpa-psk ascii|hex # $"),
    // iproute2: IPsec keys as `ip xfrm state add` takes them and `ip xfrm state` shows them,
    // and MACsec's `key ID KEY`.
    Rule::always("=auth @alg $"),
    Rule::always("=auth-trunc @alg $"),
    Rule::always("=enc @alg $"),
    Rule::always("=aead @alg $"),
    Rule::line("macsec", "=key * $"),
];

/// Where a rule applies.
#[derive(Debug, Clone, Copy)]
pub enum When {
    Always,
    /// On a line with this keyword before the match.
    Line(&'static str),
    /// Inside a block whose header starts with this keyword.
    Block(&'static str),
}

/// One secret-bearing command (see [`RULES`]).
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub when: When,
    pub pattern: &'static str,
}

impl Rule {
    const fn always(pattern: &'static str) -> Self {
        Self { when: When::Always, pattern }
    }
    const fn line(word: &'static str, pattern: &'static str) -> Self {
        Self { when: When::Line(word), pattern }
    }
    const fn block(word: &'static str, pattern: &'static str) -> Self {
        Self { when: When::Block(word), pattern }
    }
}

/// How text splits into words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Configuration and command output: words are split by white space, lines by newlines.
    Text,
    /// Log lines: also split at JSON and Rust-debug punctuation; an escaped `\n` ends a line and
    /// a quote ends a string, which a rule does not cross.
    Log,
}

#[derive(Debug, Clone, Copy)]
struct Word {
    start: usize,
    end: usize,
    /// Which line (or, in a log line, which string) the word is in.
    segment: usize,
    /// Whether white space stands before it in its line: a line of a block, not its header.
    indented: bool,
}

fn words(text: &str, mode: Mode) -> Vec<Word> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut segment = 0;
    let mut segment_start = 0;
    let mut start: Option<usize> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // (separator, ends the segment, bytes taken)
        let (separator, breaks, len) = match (mode, b) {
            (_, b'\n') => (true, true, 1),
            (_, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c') => (true, false, 1),
            (Mode::Log, b'\\') => match bytes.get(i + 1) {
                Some(b'n' | b'r') => (true, true, 2),
                Some(b't') => (true, false, 2),
                // `\"` and `\\` are part of a word: a secret may hold them.
                Some(_) => (false, false, 2),
                None => (false, false, 1),
            },
            (Mode::Log, b'"' | b'\'') => (true, true, 1),
            // Not parentheses: an algorithm is `hmac(sha256)`.
            (Mode::Log, b'[' | b']' | b'{' | b'}' | b',' | b';' | b'=') => (true, false, 1),
            _ => (false, false, 1),
        };
        if separator {
            if let Some(s) = start.take() {
                out.push(Word { start: s, end: i, segment, indented: s > segment_start });
            }
            if breaks {
                segment += 1;
                segment_start = i + len;
            }
        } else if start.is_none() {
            start = Some(i);
        }
        i += len;
    }
    if let Some(s) = start {
        out.push(Word { start: s, end: bytes.len(), segment, indented: s > segment_start });
    }
    out
}

/// One element of a compiled rule.
#[derive(Debug, Clone)]
enum Pat {
    Keyword { alternatives: Vec<&'static str>, exact: bool },
    Any,
    Type,
    Secret { to_end: bool },
    Algorithm,
}

#[derive(Debug)]
struct Compiled {
    when: When,
    pats: Vec<Pat>,
}

static COMPILED: LazyLock<Vec<Compiled>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|r| Compiled {
            when: r.when,
            pats: r
                .pattern
                .split_whitespace()
                .map(|p| match p {
                    "*" => Pat::Any,
                    "#" => Pat::Type,
                    "$" => Pat::Secret { to_end: false },
                    "$$" => Pat::Secret { to_end: true },
                    "@alg" => Pat::Algorithm,
                    p => match p.strip_prefix('=') {
                        Some(exact) => Pat::Keyword { alternatives: exact.split('|').collect(), exact: true },
                        None => Pat::Keyword { alternatives: p.split('|').collect(), exact: false },
                    },
                })
                .collect(),
        })
        .collect()
});

/// Whether `word` is `keyword` as the CLIs accept it: the whole word, or a prefix of two
/// letters or more. A prefix of a hyphenated keyword must reach past its first hyphen: `key`
/// is a key chain's `key`, not `key-string`.
fn is_keyword(word: &str, keyword: &str, exact: bool) -> bool {
    if word.eq_ignore_ascii_case(keyword) {
        return true;
    }
    if exact {
        return false;
    }
    let shortest = keyword.find('-').map_or(2, |h| h + 2);
    word.len() >= shortest
        && word.len() <= keyword.len()
        && keyword.as_bytes()[..word.len()].eq_ignore_ascii_case(word.as_bytes())
}

fn is_type(word: &str) -> bool {
    (word.len() == 1 && word.as_bytes()[0].is_ascii_digit())
        || ["clear", "md5", "text", "encrypted", "hmac-md5", "hidden"]
            .iter()
            .any(|t| word.eq_ignore_ascii_case(t))
}

fn is_algorithm(word: &str) -> bool {
    let w = word.to_ascii_lowercase();
    w.contains('(')
        || ["hmac", "cbc", "rfc", "gcm", "ctr", "ccm", "xcbc", "cmac"].iter().any(|p| w.starts_with(p))
        || [
            "md5",
            "sha1",
            "sha256",
            "sha384",
            "sha512",
            "rmd160",
            "des",
            "des3_ede",
            "cast5",
            "blowfish",
            "aes",
            "twofish",
            "camellia",
            "serpent",
            "digest_null",
            "cipher_null",
        ]
        .contains(&w.as_str())
}

/// The secret spans (byte ranges of `text`) a rule finds at word `i`, and how many words it
/// took; `None` when it does not match.
fn match_at(text: &str, words: &[Word], i: usize, pats: &[Pat]) -> Option<(usize, Vec<(usize, usize)>)> {
    let segment = words[i].segment;
    let word = |k: usize| words.get(k).filter(|w| w.segment == segment).map(|w| &text[w.start..w.end]);
    let mut k = i;
    let mut secrets = Vec::new();
    for pat in pats {
        match pat {
            Pat::Keyword { alternatives, exact } => {
                let w = word(k)?;
                if !alternatives.iter().any(|a| is_keyword(w, a, *exact)) {
                    return None;
                }
                k += 1;
            }
            Pat::Any => {
                word(k)?;
                k += 1;
            }
            Pat::Algorithm => {
                if !is_algorithm(word(k)?) {
                    return None;
                }
                k += 1;
            }
            Pat::Type => {
                if word(k).is_some_and(is_type) && word(k + 1).is_some() {
                    k += 1;
                }
            }
            Pat::Secret { to_end } => {
                word(k)?;
                let start = words[k].start;
                k += 1;
                if *to_end {
                    while word(k).is_some() {
                        k += 1;
                    }
                }
                secrets.push((start, words[k - 1].end));
            }
        }
    }
    Some((k - i, secrets))
}

/// `"key": "value"` pairs (JSON, and Rust's debug form `"key": String("value")`) whose key
/// names a secret, in text that is not parsed as JSON (a tool's text output, a log line).
static JSON_PAIR: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::unwrap_used)] // a constant pattern, checked by the tests below
    Regex::new(r#"("([^"\\]{1,200})"\s*:\s*(?:String\()?")((?:[^"\\]|\\.)*)""#).unwrap()
});

fn redact_pairs(text: &str) -> std::borrow::Cow<'_, str> {
    JSON_PAIR.replace_all(text, |c: &regex::Captures<'_>| {
        if secret_key(&c[2]) { format!("{}{REDACTED}\"", &c[1]) } else { c[0].to_string() }
    })
}

fn redact_mode(text: &str, mode: Mode) -> String {
    let text = redact_pairs(text);
    let text = text.as_ref();
    let words = words(text, mode);
    let mut secrets: Vec<(usize, usize)> = Vec::new();
    // The first word of the block header a line is under (a configuration's last unindented
    // line; in a log line, its last unindented string), and whether this line is indented.
    let mut block: Option<&str> = None;
    let mut indented = false;
    // Which `When::Line` rules' keywords stand before word `i` in its segment, kept as the words
    // go by (`scanned` is the next word to look at): one pass, however long a line an agent
    // sends.
    let mut line_seen = vec![false; COMPILED.len()];
    let mut scanned = 0;
    let mut i = 0;
    let mut current_segment = usize::MAX;
    while i < words.len() {
        let w = words[i];
        if w.segment != current_segment {
            current_segment = w.segment;
            indented = w.indented;
            if !indented {
                block = Some(&text[w.start..w.end]);
            }
            line_seen.fill(false);
        }
        for p in &words[scanned..i] {
            if p.segment != current_segment {
                continue;
            }
            let pw = &text[p.start..p.end];
            for (seen, rule) in line_seen.iter_mut().zip(COMPILED.iter()) {
                if let When::Line(kw) = rule.when
                    && kw.split('|').any(|k| is_keyword(pw, k, false))
                {
                    *seen = true;
                }
            }
        }
        scanned = i;
        let mut matched = None;
        for (rule, seen) in COMPILED.iter().zip(&line_seen) {
            let applies = match rule.when {
                When::Always => true,
                When::Line(_) => *seen,
                When::Block(kw) => {
                    indented && block.is_some_and(|h| kw.split('|').any(|k| is_keyword(h, k, false)))
                }
            };
            if applies && let Some(m) = match_at(text, &words, i, &rule.pats) {
                matched = Some(m);
                break;
            }
        }
        match matched {
            Some((taken, spans)) => {
                secrets.extend(spans);
                i += taken.max(1);
            }
            None => i += 1,
        }
    }
    if secrets.is_empty() {
        return text.to_string();
    }
    secrets.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in secrets {
        if start < at {
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// `text` (configuration, a command, command output, an error message) with every secret
/// replaced by [`REDACTED`].
pub fn redact(text: &str) -> String {
    redact_mode(text, Mode::Text)
}

/// A log line with every secret replaced (words also split at JSON and debug punctuation).
pub fn redact_log(text: &str) -> String {
    redact_mode(text, Mode::Log)
}

/// Whether a JSON key (a YANG leaf, a field) names a secret: its words (split at `-` and `_`,
/// after a module prefix) hold `password`, `secret`, `passphrase` or `psk`, or it is a key's
/// text (`key-string`, `authentication-key`, `md5-key`, `pre-shared-key`, ...). A word that
/// describes the secret (`password-type`, `key-chain`, `key-id`) does not.
pub fn secret_key(name: &str) -> bool {
    let name = name.rsplit(':').next().unwrap_or(name).to_ascii_lowercase();
    let words: Vec<&str> = name.split(['-', '_']).filter(|w| !w.is_empty()).collect();
    let Some(last) = words.last() else { return false };
    let describes =
        ["type", "mode", "encryption", "length", "format", "algorithm", "id", "chain", "enable", "enabled"];
    if describes.contains(last) {
        return false;
    }
    if words.iter().any(|w| ["password", "passwd", "secret", "passphrase", "psk", "passkey"].contains(w)) {
        return true;
    }
    matches!(
        name.as_str(),
        "key-string"
            | "authentication-key"
            | "auth-key"
            | "md5-key"
            | "pre-shared-key"
            | "preshared-key"
            | "shared-key"
            | "private-key"
            | "secret-key"
            | "encryption-key"
            | "session-key"
            | "hmac-key"
            | "tcp-md5-key"
            | "authentication-string"
    )
}

/// Every leaf of `v` replaced (the value of a secret key).
fn mask(v: &Value) -> Value {
    match v {
        Value::Null => Value::Null,
        Value::Array(a) => Value::Array(a.iter().map(mask).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), mask(v))).collect()),
        _ => Value::String(REDACTED.into()),
    }
}

/// A JSON value with its secrets redacted: by key, and in every string as text.
pub fn redact_json(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(redact(s)),
        // Commands (`network.cli.configure`'s `commands`, a notification's) are one
        // configuration: a block's header keeps the context of the lines under it.
        Value::Array(a)
            if !a.is_empty() && a.iter().all(|e| e.as_str().is_some_and(|s| !s.contains('\n'))) =>
        {
            let joined = a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n");
            redact(&joined).split('\n').map(|l| Value::String(l.to_string())).collect()
        }
        Value::Array(a) => Value::Array(a.iter().map(redact_json).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), if secret_key(k) { mask(v) } else { redact_json(v) }))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A secret that is [`REDACTED`] itself in `text`: a client that sends back what it was shown
/// would set the password to the placeholder. The line, if any.
pub fn placeholder_secret(text: &str) -> Option<&str> {
    // The placeholder is where a secret goes when redacting a line with a word in its place
    // removes that word.
    const PROBE: &str = "netdojo-placeholder-probe";
    text.lines()
        .find(|line| line.contains(REDACTED) && !redact(&line.replace(REDACTED, PROBE)).contains(PROBE))
}

/// stderr for `tracing_subscriber::fmt().with_writer(...)`, every line redacted as a log line
/// ([`redact_log`]) before it is written: whatever a crate logs, at any level, with whatever
/// arguments, no secret reaches the log.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

/// One event's formatted text, redacted and written whole when the event is done.
#[derive(Debug, Default)]
pub struct LogLine(Vec<u8>);

impl std::io::Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        use std::io::Write;
        let text = String::from_utf8_lossy(&self.0);
        let _ = std::io::stderr().lock().write_all(redact_log(&text).as_bytes());
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine;
    fn make_writer(&'a self) -> LogLine {
        LogLine::default()
    }
}

/// The log subscriber of netdojo's binaries: the filter from `env` (default `default`),
/// rmcp's own request and message logs kept at `info` whatever the filter says (they print
/// every argument of every request), every line through [`LogWriter`].
pub fn init_logging(env: &str, default: &str) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_env(env)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let rmcp_quiet = tracing_subscriber::filter::filter_fn(|meta| {
        !(meta.target().starts_with("rmcp") && *meta.level() > tracing::Level::INFO)
    });
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(LogWriter)
                .with_filter(filter)
                .with_filter(rmcp_quiet),
        )
        .try_init();
}

/// The redaction corpus's format (testdata/redaction/corpus.txt): `DIALECT<TAB>TEXT` a line,
/// `#` a comment; in TEXT, `\n` is a line break, `\t` a tab, each secret written `{{...}}`.
pub mod corpus {
    /// One entry.
    #[derive(Debug, Clone)]
    pub struct Entry {
        pub dialect: String,
        /// The text with its secrets.
        pub clear: String,
        /// The text as redaction must leave it.
        pub expected: String,
        pub secrets: Vec<String>,
    }

    /// The entries of a corpus; a malformed line is an error naming it.
    pub fn parse(corpus: &str) -> Result<Vec<Entry>, String> {
        corpus
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|(n, l)| {
                let Some((dialect, text)) = l.split_once('\t') else {
                    return Err(format!("redaction corpus line {}: not DIALECT<TAB>TEXT", n + 1));
                };
                let text = text.replace("\\n", "\n").replace("\\t", "\t");
                let (mut clear, mut expected, mut secrets) = (String::new(), String::new(), Vec::new());
                let mut rest = text.as_str();
                while let Some(open) = rest.find("{{") {
                    let Some(close) = rest[open..].find("}}").map(|c| c + open) else {
                        return Err(format!("redaction corpus line {}: `{{{{` without `}}}}`", n + 1));
                    };
                    clear.push_str(&rest[..open]);
                    expected.push_str(&rest[..open]);
                    clear.push_str(&rest[open + 2..close]);
                    expected.push_str(super::REDACTED);
                    secrets.push(rest[open + 2..close].to_string());
                    rest = &rest[close + 2..];
                }
                clear.push_str(rest);
                expected.push_str(rest);
                Ok(Entry { dialect: dialect.to_string(), clear, expected, secrets })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORPUS: &str = include_str!("../../../testdata/redaction/corpus.txt");

    #[test]
    fn every_corpus_line_is_redacted_exactly() {
        let corpus = corpus::parse(CORPUS).expect("the corpus");
        assert!(corpus.len() >= 40, "{} lines", corpus.len());
        for dialect in ["frr", "ios"] {
            assert!(corpus.iter().filter(|c| c.dialect.starts_with(dialect)).count() >= 15, "{dialect}");
        }
        for corpus::Entry { dialect, clear, expected, secrets } in &corpus {
            assert_eq!(&redact(clear), expected, "{dialect}: {clear:?}");
            // Idempotent: what was redacted stays as it is.
            assert_eq!(&redact(expected), expected, "{dialect}: {expected:?}");
            // The same text as a log line would print it: JSON, and Rust's debug form.
            let json = serde_json::json!({"commands": clear.lines().collect::<Vec<_>>()}).to_string();
            let debug =
                format!("request=Request {{ arguments: Some({:?}) }}", clear.lines().collect::<Vec<_>>());
            for log in [format!("INFO args={json}"), debug, format!("{clear:?}")] {
                let out = redact_log(&log);
                for s in secrets {
                    assert!(!out.contains(s.as_str()), "{dialect}: `{s}` in log line {out}");
                }
            }
            // In JSON: a command array keeps block context.
            let v = redact_json(&serde_json::json!({"commands": clear.lines().collect::<Vec<_>>()}));
            let text = v.to_string();
            for s in secrets {
                assert!(!text.contains(s.as_str()), "{dialect}: `{s}` in {text}");
            }
        }
    }

    #[test]
    fn no_rule_crosses_a_line_or_hides_a_keyword() {
        // The old regex turned ` key 1\n  key-string S` into `key 1\n  <redacted> S`.
        assert_eq!(
            redact("key chain KC1\n key 1\n  key-string S"),
            "key chain KC1\n key 1\n  key-string <redacted>"
        );
        assert_eq!(redact("password\nhostname R1"), "password\nhostname R1");
        for plain in [
            "ip route 10.0.0.0/8 10.0.12.2",
            "route-map RM permit 10\n set community 65000:1",
            "ip rip authentication key-chain KC1",
            "ip rip authentication mode md5",
            "service password-encryption",
            "ip ospf authentication message-digest",
            "pre-shared-key key-chain KC",
            "snmp-server host 10.0.0.1 version 3 auth admin",
            "standby 1 authentication md5 key-chain KC",
        ] {
            assert_eq!(redact(plain), plain);
        }
    }

    /// An agent's line of any length is redacted in one pass (a 10 MB command is logged): a
    /// quadratic look-back took 285 s for 50,000 words.
    #[test]
    fn a_long_line_is_redacted_in_one_pass() {
        let line = "tacacs-server host 10.0.0.1 key S3 ".repeat(40_000);
        let out = redact(&line);
        assert_eq!(out.matches(REDACTED).count(), 40_000);
        assert!(!out.contains("S3"));
        assert_eq!(redact(&"a ".repeat(200_000)), "a ".repeat(200_000));
    }

    #[test]
    fn json_is_redacted_by_key() {
        let v = serde_json::json!({"frr-ripd:ripd": {"instance": [{"vrf": "default",
            "interface": [{"name": "eth0", "authentication-password": "S1", "authentication-scheme": {"mode": "md5"}}]}]},
            "key-chain": "KC1", "key-id": 3, "password-type": "clear", "area-password": {"password": "S2"}});
        let out = redact_json(&v);
        let text = out.to_string();
        assert!(!text.contains("S1") && !text.contains("S2"), "{text}");
        assert_eq!(out["key-chain"], "KC1");
        assert_eq!(out["key-id"], 3);
        assert_eq!(out["password-type"], "clear");
        assert_eq!(
            out["frr-ripd:ripd"]["instance"][0]["interface"][0]["authentication-scheme"]["mode"],
            "md5"
        );
        // As text (a tool's output of `show yang ...`), too.
        let pretty = serde_json::to_string_pretty(&v).expect("json");
        let text = redact(&pretty);
        assert!(!text.contains("S1") && !text.contains("S2"), "{text}");
        assert!(text.contains("\"key-chain\": \"KC1\""), "{text}");
    }

    #[test]
    fn a_placeholder_sent_back_is_found() {
        assert_eq!(
            placeholder_secret("hostname R1\n ip rip authentication string <redacted>\n"),
            Some(" ip rip authentication string <redacted>")
        );
        assert_eq!(placeholder_secret("hostname R1\ndescription <redacted>\n"), None);
    }
}
