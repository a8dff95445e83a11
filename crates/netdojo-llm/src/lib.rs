//! The LLM agent, whatever the server: the prompting strategies of the seeds (single-turn,
//! chain-of-thought, few-shot, ReAct), the prompt templates (files under `prompts/`), the text
//! protocol for models without tool calling, and the conversation loop with its retries.
//!
//! A wire format plugs in as a [`ChatModel`]: `netdojo-openai` (chat completions) and
//! `netdojo-ollama` (`/api/chat`) are one each. Everything else about an LLM agent lives here,
//! once.

mod agent;
mod chat;
pub mod http;
pub mod lookup;
mod prompt;
#[cfg(feature = "testing")]
pub mod testing;
mod text;

pub use agent::{LlmAgent, LlmAgentFactory, Settings};
pub use chat::{
    BadArguments, ChatError, ChatModel, Exchange, Message, Reply, ReplyCall, RetryPolicy, Role, Sampling,
    Secret, function_tools,
};
pub use lookup::{CommandReference, LOOKUP_TOOL, Lookup};
pub use prompt::{LookupHint, Strategy, ToolMode, examples_for, render_examples, system_prompt};
pub use text::{extract_code, parse_reply};
