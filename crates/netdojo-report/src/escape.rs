//! HTML escaping, shared by the pages (`html`) and the SVG plots in them (`svg`): below both, so
//! that they import one way.

/// Text made safe for HTML text and attribute values (single- and double-quoted).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
