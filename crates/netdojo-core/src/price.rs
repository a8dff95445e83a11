//! What tokens cost: the user's price table (`--prices FILE`), per model, in US dollars per
//! million tokens. Nothing is guessed: a model the table does not price is an error.
//!
//! ```json
//! {
//!   "gpt-4o-mini": { "input": 0.15, "cached_input": 0.075, "output": 0.60 },
//!   "smollm2-135m": { "input": 0, "output": 0 }
//! }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::agent::TokenUsage;
use crate::error::PriceError;

/// One model's prices, US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Prompt tokens not read from the cache.
    pub input: f64,
    /// Prompt tokens read from the server's cache; `input` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Completion tokens.
    pub output: f64,
}

impl Price {
    /// The cost of `usage` in US dollars. Cached tokens are a part of the prompt's: they are
    /// priced at `cached_input`, the rest of the prompt at `input`.
    pub fn cost_usd(&self, usage: &TokenUsage) -> f64 {
        let cached = usage.cached_tokens.min(usage.prompt_tokens);
        let fresh = usage.prompt_tokens - cached;
        (fresh as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + usage.completion_tokens as f64 * self.output)
            / 1e6
    }
}

/// A price table: model name → [`Price`].
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    pub path: PathBuf,
    pub models: BTreeMap<String, Price>,
}

impl PriceTable {
    /// Reads a JSON table (see the module's example).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, PriceError> {
        let path = path.as_ref().to_path_buf();
        let text =
            std::fs::read_to_string(&path).map_err(|source| PriceError::Io { path: path.clone(), source })?;
        Self::parse(&path, &text)
    }

    /// Parses a table read from `path` (named in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, PriceError> {
        let invalid = |message: String| PriceError::Invalid { path: path.to_path_buf(), message };
        let models: BTreeMap<String, Price> = serde_json::from_str(text).map_err(|e| {
            invalid(format!(
                "not a price table ({e}); expected {{\"MODEL\": {{\"input\": USD, \"output\": USD, \"cached_input\"?: USD}}}}, per million tokens"
            ))
        })?;
        for (model, p) in &models {
            for (field, v) in
                [("input", Some(p.input)), ("output", Some(p.output)), ("cached_input", p.cached_input)]
            {
                if let Some(v) = v
                    && !(v.is_finite() && v >= 0.0)
                {
                    return Err(invalid(format!(
                        "model `{model}`: `{field}` is {v}: a price is a number ≥ 0"
                    )));
                }
            }
        }
        Ok(Self { path: path.to_path_buf(), models })
    }

    /// The price of `model`; an error naming the file and the model when the table has none.
    pub fn price(&self, model: &str) -> Result<Price, PriceError> {
        self.models.get(model).copied().ok_or_else(|| PriceError::UnknownModel {
            path: self.path.clone(),
            model: model.to_string(),
            known: if self.models.is_empty() {
                "none".into()
            } else {
                self.models.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u64, cached: u64, completion: u64) -> TokenUsage {
        TokenUsage { prompt_tokens: prompt, completion_tokens: completion, cached_tokens: cached }
    }

    #[test]
    fn prices_fresh_cached_and_completion_tokens_per_million() {
        let table = PriceTable::parse(
            Path::new("prices.json"),
            r#"{"m": {"input": 2.5, "cached_input": 1.25, "output": 10}, "free": {"input": 0, "output": 0}}"#,
        )
        .expect("table");
        let m = table.price("m").expect("m");
        // 600k fresh at 2.5 + 400k cached at 1.25 + 100k at 10 = 1.5 + 0.5 + 1.0
        assert!((m.cost_usd(&usage(1_000_000, 400_000, 100_000)) - 3.0).abs() < 1e-12);
        // Without a cached price, cached tokens cost what the others do.
        let plain = Price { cached_input: None, ..m };
        assert!((plain.cost_usd(&usage(1_000_000, 400_000, 0)) - 2.5).abs() < 1e-12);
        assert_eq!(table.price("free").expect("free").cost_usd(&usage(123, 0, 45)), 0.0);
    }

    #[test]
    fn an_unknown_model_names_the_file_and_the_model() {
        let table = PriceTable::parse(Path::new("/etc/p.json"), r#"{"a": {"input": 1, "output": 2}}"#)
            .expect("table");
        let e = table.price("gpt-5").expect_err("unknown").to_string();
        assert!(e.contains("/etc/p.json") && e.contains("`gpt-5`") && e.contains("a"), "{e}");
    }

    #[test]
    fn bad_tables_are_refused_with_the_file_and_field() {
        for (text, needle) in [
            (r#"{"a": {"input": -1, "output": 2}}"#, "`input` is -1"),
            (r#"{"a": {"input": 1}}"#, "output"),
            (r#"{"a": {"input": 1, "output": 2, "cache": 1}}"#, "cache"),
            (r#"["a"]"#, "not a price table"),
        ] {
            let e = PriceTable::parse(Path::new("p.json"), text).expect_err(text).to_string();
            assert!(e.starts_with("p.json: ") && e.contains(needle), "{text}: {e}");
        }
    }
}
