//! Loader of the MALT text-protobuf format:
//! `entity { id { kind: X name: "n" } <kind>_attr { ... } }` and
//! `relationship { kind: RK_X a { kind: .. name: ".." } z { kind: .. name: ".." } }`.
//!
//! The parser is a small hand-written one for the subset MALT uses (fields, nested messages,
//! quoted strings, bare enums and numbers, `#` comments); errors name the file and line.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::model::{Attrs, EntityKind, Graph, Relation};

/// A MALT file that cannot be read or understood.
#[derive(Debug, thiserror::Error)]
pub enum MaltError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Parse { path: PathBuf, line: usize, message: String },
}

/// A scalar or nested message, with the line it started on.
#[derive(Debug, Clone, PartialEq)]
enum FieldValue {
    Str(String),
    Bare(String),
    Msg(Vec<Field>),
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    name: String,
    line: usize,
    value: FieldValue,
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    line: usize,
    path: &'a Path,
}

impl<'a> Parser<'a> {
    fn err(&self, line: usize, message: impl Into<String>) -> MaltError {
        MaltError::Parse { path: self.path.to_path_buf(), line, message: message.into() }
    }

    fn skip_ws(&mut self) {
        while let Some(&b) = self.src.get(self.pos) {
            match b {
                b'\n' => {
                    self.line += 1;
                    self.pos += 1;
                }
                b'#' => {
                    while self.src.get(self.pos).is_some_and(|&c| c != b'\n') {
                        self.pos += 1;
                    }
                }
                b if b.is_ascii_whitespace() => self.pos += 1,
                _ => break,
            }
        }
    }

    fn ident(&mut self) -> Option<String> {
        let start = self.pos;
        while self
            .src
            .get(self.pos)
            .is_some_and(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'+'))
        {
            self.pos += 1;
        }
        (self.pos > start).then(|| String::from_utf8_lossy(&self.src[start..self.pos]).into_owned())
    }

    fn string(&mut self) -> Result<String, MaltError> {
        let line = self.line;
        let quote = self.src[self.pos];
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            match self.src.get(self.pos) {
                None | Some(b'\n') => return Err(self.err(line, "unterminated string")),
                Some(&c) if c == quote => {
                    self.pos += 1;
                    return Ok(String::from_utf8_lossy(&out).into_owned());
                }
                Some(b'\\') => {
                    let c = self
                        .src
                        .get(self.pos + 1)
                        .copied()
                        .ok_or_else(|| self.err(line, "unterminated string"))?;
                    out.push(match c {
                        b'n' => b'\n',
                        b't' => b'\t',
                        other => other,
                    });
                    self.pos += 2;
                }
                Some(&c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// Fields until `}` (nested) or end of input (top level).
    fn fields(&mut self, nested: Option<usize>) -> Result<Vec<Field>, MaltError> {
        let mut fields = Vec::new();
        loop {
            self.skip_ws();
            match self.src.get(self.pos) {
                None => {
                    return match nested {
                        Some(open) => {
                            Err(self.err(self.line, format!("missing `}}` for the `{{` of line {open}")))
                        }
                        None => Ok(fields),
                    };
                }
                Some(b'}') => {
                    if nested.is_none() {
                        return Err(self.err(self.line, "unexpected `}`"));
                    }
                    self.pos += 1;
                    return Ok(fields);
                }
                _ => {}
            }
            let line = self.line;
            let name = self.ident().ok_or_else(|| {
                let c = self.src.get(self.pos).map(|&c| c as char).unwrap_or(' ');
                self.err(line, format!("expected a field name, found `{c}`"))
            })?;
            self.skip_ws();
            let colon = self.src.get(self.pos) == Some(&b':');
            if colon {
                self.pos += 1;
                self.skip_ws();
            }
            let value = match self.src.get(self.pos) {
                Some(b'{') => {
                    self.pos += 1;
                    FieldValue::Msg(self.fields(Some(line))?)
                }
                Some(b'"' | b'\'') if colon => FieldValue::Str(self.string()?),
                _ if colon => FieldValue::Bare(
                    self.ident()
                        .ok_or_else(|| self.err(self.line, format!("field `{name}` has no value")))?,
                ),
                _ => return Err(self.err(self.line, format!("expected `:` or `{{` after `{name}`"))),
            };
            fields.push(Field { name, line, value });
        }
    }
}

fn parse(text: &str, path: &Path) -> Result<Vec<Field>, MaltError> {
    Parser { src: text.as_bytes(), pos: 0, line: 1, path }.fields(None)
}

fn scalar(v: &FieldValue) -> Value {
    match v {
        FieldValue::Str(s) => Value::String(s.clone()),
        FieldValue::Bare(s) => {
            if let Ok(n) = s.parse::<u64>() {
                Value::from(n)
            } else if let Ok(n) = s.parse::<i64>() {
                Value::from(n)
            } else if let Some(f) = s.parse::<f64>().ok().filter(|f| f.is_finite()) {
                Value::from(f)
            } else if s == "true" || s == "false" {
                Value::Bool(s == "true")
            } else {
                Value::String(s.clone())
            }
        }
        FieldValue::Msg(_) => Value::Null,
    }
}

fn flatten(prefix: &str, fields: &[Field], out: &mut Attrs) {
    for f in fields {
        let key = if prefix.is_empty() { f.name.clone() } else { format!("{prefix}.{}", f.name) };
        match &f.value {
            FieldValue::Msg(inner) => flatten(&key, inner, out),
            other => {
                out.insert(key, scalar(other));
            }
        }
    }
}

/// Reads (kind, name) from an `id`, `a` or `z` message.
fn entity_id(fields: &[Field], at: usize, p: &Path) -> Result<(EntityKind, String, bool), MaltError> {
    let err = |message: String| MaltError::Parse { path: p.to_path_buf(), line: at, message };
    let mut kind = None;
    let mut name = None;
    for f in fields {
        match (f.name.as_str(), &f.value) {
            ("kind", FieldValue::Bare(k)) => {
                kind = Some((
                    EntityKind::parse(k).ok_or_else(|| err(format!("bad entity kind `{k}`")))?,
                    matches!(k.as_str(), "EK_SUPER_BLOCK" | "EK_SPINE_BLOCK"),
                ))
            }
            ("name", FieldValue::Str(n)) => name = Some(n.clone()),
            _ => {}
        }
    }
    match (kind, name) {
        (Some((k, underscore)), Some(n)) if !n.is_empty() => Ok((k, n, underscore)),
        (None, _) => Err(err("entity id without `kind`".into())),
        _ => Err(err("entity id without a non-empty `name`".into())),
    }
}

fn msg<'f>(fields: &'f [Field], name: &str) -> Option<(&'f [Field], usize)> {
    fields.iter().find_map(|f| match &f.value {
        FieldValue::Msg(m) if f.name == name => Some((m.as_slice(), f.line)),
        _ => None,
    })
}

/// Parses MALT text. `path` is only used in error messages. Duplicate entity records merge
/// (their attributes are united); a relationship repeated with the same ends and kind is kept
/// once; a relationship naming an unknown entity is an error.
pub fn parse_str(text: &str, path: &Path) -> Result<Graph, MaltError> {
    let top = parse(text, path)?;
    let mut g = Graph::new();
    let mut underscore = false;
    let err = |line: usize, message: String| MaltError::Parse { path: path.to_path_buf(), line, message };
    for rec in top.iter().filter(|f| f.name == "entity") {
        let FieldValue::Msg(body) = &rec.value else {
            return Err(err(rec.line, "`entity` must be a message".into()));
        };
        let (id, line) = msg(body, "id").ok_or_else(|| err(rec.line, "entity without `id`".into()))?;
        let (kind, name, us) = entity_id(id, line, path)?;
        underscore |= us;
        let mut attrs = Attrs::new();
        for f in body.iter().filter(|f| f.name != "id") {
            if let FieldValue::Msg(inner) = &f.value {
                // The `<kind>_attr` wrapper is implied by the kind; paths start below it.
                flatten("", inner, &mut attrs);
            }
        }
        match g.get(&kind, &name) {
            Some(ix) => {
                for (k, v) in attrs {
                    g.set_attr(ix, &k, Some(v));
                }
            }
            None => {
                g.add_node(kind, &name, attrs).map_err(|e| err(rec.line, e.to_string()))?;
            }
        }
    }
    for rec in top.iter().filter(|f| f.name == "relationship") {
        let FieldValue::Msg(body) = &rec.value else {
            return Err(err(rec.line, "`relationship` must be a message".into()));
        };
        let rel = body
            .iter()
            .find_map(|f| match (&f.value, f.name.as_str()) {
                (FieldValue::Bare(k), "kind") => Some(k.as_str()),
                _ => None,
            })
            .ok_or_else(|| err(rec.line, "relationship without `kind`".into()))?;
        let rel =
            Relation::parse(rel).ok_or_else(|| err(rec.line, format!("bad relationship kind `{rel}`")))?;
        let mut ends = Vec::with_capacity(2);
        for end in ["a", "z"] {
            let (fields, line) =
                msg(body, end).ok_or_else(|| err(rec.line, format!("relationship without `{end}`")))?;
            let (kind, name, _) = entity_id(fields, line, path)?;
            let ix = g
                .get(&kind, &name)
                .ok_or_else(|| err(line, format!("relationship names unknown {kind} `{name}`")))?;
            ends.push(ix);
        }
        if g.find_edge(ends[0], ends[1], &rel).is_none() {
            g.add_edge(ends[0], ends[1], rel).map_err(|e| err(rec.line, e.to_string()))?;
        }
    }
    if let Some(f) = top.iter().find(|f| f.name != "entity" && f.name != "relationship") {
        return Err(err(f.line, format!("unexpected top-level field `{}`", f.name)));
    }
    g.set_underscore_spelling(underscore);
    Ok(g)
}

/// Reads a MALT file.
pub fn load(path: impl AsRef<Path>) -> Result<Graph, MaltError> {
    let path = path.as_ref();
    let text =
        std::fs::read_to_string(path).map_err(|source| MaltError::Io { path: path.to_path_buf(), source })?;
    parse_str(&text, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entities_attributes_and_relations() {
        let text = r#"
entity { id { kind: EK_PACKET_SWITCH name: "s1" } packet_switch_attr { switch_loc { stage: 2 } } }
entity { id { kind: EK_PORT name: "s1.p1" } port_attr { physical_capacity_bps: 1000000000 } }
entity { id { kind: EK_PORT name: "s1.p1" } }
# a comment
relationship { kind: RK_CONTAINS a { kind: EK_PACKET_SWITCH name: "s1" } z { kind: EK_PORT name: "s1.p1" } }
"#;
        let g = parse_str(text, Path::new("x.textproto")).expect("parses");
        assert_eq!((g.node_count(), g.edge_count()), (2, 1));
        let s = g.find("s1", None).expect("s1");
        assert_eq!(g.node(s).attrs.get("switch_loc.stage"), Some(&Value::from(2u64)));
        let p = g.find("s1.p1", Some(&EntityKind::Port)).expect("port");
        assert_eq!(g.capacity(s), 1_000_000_000);
        assert_eq!(g.capacity(p), 1_000_000_000);
    }

    #[test]
    fn errors_carry_path_and_line() {
        let text = "entity {\n  id {\n    kind: EK_PORT\n    name: \"p\n  }\n}\n";
        let e = parse_str(text, Path::new("bad.txt")).expect_err("unterminated").to_string();
        assert!(e.starts_with("bad.txt:4:"), "{e}");
        let text = "entity {\n  id { kind: EK_PORT name: \"p\" }\n";
        let e = parse_str(text, Path::new("bad.txt")).expect_err("unclosed").to_string();
        assert!(e.contains("bad.txt:3:") && e.contains("line 1"), "{e}");
        let text = "entity { id { kind: EK_PORT name: \"p\" } }\nrelationship {\n kind: RK_CONTAINS\n a { kind: EK_RACK name: \"r\" }\n z { kind: EK_PORT name: \"p\" } }\n";
        let e = parse_str(text, Path::new("bad.txt")).expect_err("unknown a").to_string();
        assert!(e.contains("bad.txt:4:") && e.contains("unknown EK_RACK `r`"), "{e}");
        let text = "entity { id { kind: ek_port name: \"p\" } }\n";
        let e = parse_str(text, Path::new("bad.txt")).expect_err("bad kind").to_string();
        assert!(e.contains("bad.txt:1:") && e.contains("bad entity kind"), "{e}");
    }
}
