//! Who a streamable HTTP client is (draft 002 §8: "all operations run with the privileges of
//! the authenticated MCP session"): a bearer token (`Authorization: Bearer TOKEN`, as MCP's
//! authorization spec has HTTP clients send it) names the client's role in a token file.
//!
//! The token file maps each token to a role, in YAML or JSON (JSON is YAML):
//!
//! ```yaml
//! # netdojo-mcp --tokens FILE; chmod 600 FILE
//! 3f9c1e...: operator
//! 77ab02...: read-only
//! ```
//!
//! It must be readable by its owner only (like an SSH key), and tokens are at least
//! [`MIN_TOKEN_LEN`] characters. Tokens are never logged or echoed in errors: an entry is named
//! by its position in the file.

use std::path::Path;

use subtle::ConstantTimeEq;

use crate::server::Role;

/// The shortest token accepted: 128 bits in hex.
pub const MIN_TOKEN_LEN: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("--tokens {file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "--tokens {file}: readable or writable by group or others (mode {mode:o}); tokens are secrets: chmod 600 {file}"
    )]
    Permissions { file: String, mode: u32 },
    #[error("--tokens {file}: {message}")]
    Format { file: String, message: String },
}

/// The tokens of a token file and the role each gives.
#[derive(Clone)]
pub struct Tokens {
    entries: Vec<(Vec<u8>, Role)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        write!(f, "Tokens({} entries)", self.entries.len())
    }
}

impl Tokens {
    /// Reads a token file, refusing one that others may read.
    pub fn load(path: &Path) -> Result<Self, TokenFileError> {
        let file = path.display().to_string();
        let meta =
            std::fs::metadata(path).map_err(|source| TokenFileError::Io { file: file.clone(), source })?;
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(TokenFileError::Permissions { file, mode });
            }
        }
        let text = std::fs::read_to_string(path)
            .map_err(|source| TokenFileError::Io { file: file.clone(), source })?;
        Self::parse(&text).map_err(|message| TokenFileError::Format { file, message })
    }

    /// A token file's text: a mapping from token to role. Errors name entries by position.
    pub fn parse(text: &str) -> Result<Self, String> {
        let map: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(text)
            // The parser's message may quote the file's text, that is a token: say where only.
            .map_err(|e| match e.location() {
                Some(at) => {
                    format!("not a mapping of token to role (line {}, column {})", at.line(), at.column())
                }
                None => "not a mapping of token to role".to_string(),
            })?;
        let mut entries: Vec<(Vec<u8>, Role)> = Vec::new();
        for (i, (token, role)) in map.iter().enumerate() {
            let n = i + 1;
            let token = token.as_str().ok_or_else(|| format!("entry {n}: the token is not a string"))?;
            if token.len() < MIN_TOKEN_LEN || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!(
                    "entry {n}: a token is at least {MIN_TOKEN_LEN} characters without spaces (e.g. `openssl rand -hex 16`)"
                ));
            }
            let role: Role = role
                .as_str()
                .ok_or_else(|| format!("entry {n}: the role is not a string (roles: operator, read-only)"))?
                .parse()
                .map_err(|e| format!("entry {n}: {e}"))?;
            if entries.iter().any(|(t, _)| t.as_slice() == token.as_bytes()) {
                return Err(format!("entry {n}: the same token twice"));
            }
            entries.push((token.as_bytes().to_vec(), role));
        }
        if entries.is_empty() {
            return Err("no tokens".into());
        }
        Ok(Self { entries })
    }

    /// The role of a presented token; every entry is compared, in constant time.
    pub fn role(&self, presented: &str) -> Option<Role> {
        let mut found = None;
        for (token, role) in &self.entries {
            if bool::from(token.as_slice().ct_eq(presented.as_bytes())) {
                found = Some(*role);
            }
        }
        found
    }

    /// The role of an HTTP request's `Authorization: Bearer TOKEN`.
    pub fn authorize(&self, authorization: Option<&str>) -> Option<Role> {
        let value = authorization?.trim();
        let (scheme, token) = value.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        self.role(token.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OP: &str = "0123456789abcdef0123456789abcdef";
    const RO: &str = "fedcba9876543210fedcba9876543210";

    #[test]
    fn a_token_file_gives_each_token_its_role() {
        let tokens = Tokens::parse(&format!("{OP}: operator\n{RO}: read-only\n")).expect("valid");
        assert_eq!(tokens.role(OP), Some(Role::Operator));
        assert_eq!(tokens.authorize(Some(&format!("Bearer {RO}"))), Some(Role::ReadOnly));
        assert_eq!(tokens.authorize(Some(&format!("bearer {OP}"))), Some(Role::Operator));
        assert_eq!(tokens.authorize(Some(&format!("Basic {OP}"))), None);
        assert_eq!(tokens.authorize(Some("Bearer 0123456789abcdef0123456789abcdee")), None);
        assert_eq!(tokens.authorize(None), None);
        assert!(!format!("{tokens:?}").contains(OP));
        let json = Tokens::parse(&format!("{{\"{OP}\": \"read-only\"}}")).expect("JSON is YAML");
        assert_eq!(json.role(OP), Some(Role::ReadOnly));
    }

    #[test]
    fn bad_token_files_are_refused_without_quoting_the_tokens() {
        let short = Tokens::parse("abc: operator\n").expect_err("short");
        assert!(short.contains("entry 1") && !short.contains("abc"), "{short}");
        let role = Tokens::parse(&format!("{OP}: root\n")).expect_err("role");
        assert!(role.contains("entry 1") && role.contains("unknown role") && !role.contains(OP), "{role}");
        let broken = Tokens::parse(&format!("{OP}: [operator\n")).expect_err("syntax");
        assert!(!broken.contains(OP), "{broken}");
        assert!(Tokens::parse("").is_err());
    }

    #[test]
    fn a_token_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.yaml");
        std::fs::write(&path, format!("{OP}: operator\n")).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = Tokens::load(&path).expect_err("world-readable");
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(Tokens::load(&path).expect("owner only").role(OP), Some(Role::Operator));
    }
}
