//! An MCP client as a netdojo [`Environment`]: any MCP server's tools (a remote netdojo's
//! `netdojo-mcp serve`, a device vendor's MCP server) become the tools of an episode, so the
//! runner and any agent of netdojo work with it through the same traits.

use async_trait::async_trait;
use netdojo_core::{
    Check, EnvError, Environment, Observation, Outcome, StateCheck, Task, ToolCall, ToolSpec,
};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};

use crate::tools::DONE;

pub const ENV: &str = "mcp-client";

fn err(message: impl Into<String>) -> EnvError {
    EnvError::runtime(ENV, message)
}

/// One connection to an MCP server, used as one episode's environment.
#[derive(Debug)]
pub struct McpEnvironment {
    client: RunningService<RoleClient, ()>,
    tools: Vec<ToolSpec>,
    has_done: bool,
}

impl McpEnvironment {
    /// Connects over streamable HTTP.
    pub async fn connect_http(url: &str) -> Result<Self, EnvError> {
        install_crypto_provider();
        let client =
            ().serve(StreamableHttpClientTransport::from_uri(url.to_string()))
                .await
                .map_err(|e| EnvError::setup(ENV, format!("connecting to {url}")).with_source(e))?;
        Self::from_client(client).await
    }

    /// Starts `command` and speaks MCP on its stdio.
    pub async fn connect_stdio(command: tokio::process::Command) -> Result<Self, EnvError> {
        let setup = |m: String| EnvError::setup(ENV, m);
        let child = TokioChildProcess::new(command)
            .map_err(|e| setup("starting the server".into()).with_source(e))?;
        let client = ().serve(child).await.map_err(|e| setup("MCP handshake".into()).with_source(e))?;
        Self::from_client(client).await
    }

    async fn from_client(client: RunningService<RoleClient, ()>) -> Result<Self, EnvError> {
        let listed = client.list_all_tools().await.map_err(|e| err(format!("tools/list: {e}")))?;
        let has_done = listed.iter().any(|t| t.name == DONE);
        let tools = listed
            .into_iter()
            .filter(|t| t.name != DONE)
            .map(|t| {
                ToolSpec::new(
                    t.name.to_string(),
                    t.description.as_deref().unwrap_or_default(),
                    Value::Object((*t.input_schema).clone()),
                )
            })
            .collect();
        Ok(Self { client, tools, has_done })
    }

    /// The server's `network` capability, as typed SDKs see it (under `experimental`).
    pub fn network_capability(&self) -> Option<Value> {
        let info = self.client.peer_info()?;
        let network = info.capabilities.experimental.as_ref()?.get("network")?;
        Some(Value::Object(network.clone()))
    }

    async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
    ) -> Result<Result<(String, Value, bool), Value>, EnvError> {
        match self
            .client
            .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(arguments))
            .await
        {
            Ok(result) => {
                let text: String =
                    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
                let data = result.structured_content.clone().unwrap_or(Value::Null);
                Ok(Ok((text, data, result.is_error != Some(true))))
            }
            Err(ServiceError::McpError(e)) => {
                Ok(Err(json!({"code": e.code.0, "message": e.message, "data": e.data})))
            }
            Err(other) => Err(err(format!("{name}: {other}"))),
        }
    }
}

#[async_trait]
impl Environment for McpEnvironment {
    fn tools(&self) -> Vec<ToolSpec> {
        self.tools.clone()
    }

    /// The server is already in its initial state: the brief is its `instructions`.
    async fn reset(&mut self, _task: &Task) -> Result<String, EnvError> {
        Ok(self.client.peer_info().and_then(|i| i.instructions.clone()).unwrap_or_default())
    }

    async fn execute(&mut self, call: &ToolCall) -> Result<Observation, EnvError> {
        let arguments = match &call.arguments {
            Value::Object(o) => o.clone(),
            Value::Null => JsonObject::new(),
            other => {
                return Ok(Observation::error(call, format!("arguments must be an object, not {other}")));
            }
        };
        Ok(match self.call(&call.name, arguments).await? {
            Ok((text, data, ok)) => {
                let mut obs = Observation::ok(call, text, (!data.is_null()).then_some(data));
                obs.ok = ok;
                obs
            }
            Err(error) => {
                let mut obs = Observation::error(
                    call,
                    format!("{} ({})", error["message"].as_str().unwrap_or_default(), error["code"]),
                );
                obs.data = Some(json!({"error": error}));
                obs
            }
        })
    }

    /// The server checks its own state after each step (a netdojo server records it in its
    /// run directory); this side sees none.
    async fn check(&mut self) -> Result<StateCheck, EnvError> {
        Ok(StateCheck::safe())
    }

    /// Ends the server's episode with `done` (when it has one) and reports its verdict.
    async fn evaluate(&mut self, _task: &Task, _answer: Option<&Value>) -> Result<Outcome, EnvError> {
        if !self.has_done {
            return Ok(Outcome::default());
        }
        let (_, data, _) =
            self.call(DONE, JsonObject::new()).await?.map_err(|e| err(format!("done: {e}")))?;
        let record = &data["record"];
        let correct = record["metrics"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["name"] == "correct"))
            .and_then(|m| m["value"].as_bool());
        let checks = match correct {
            Some(c) => {
                vec![Check::new("remote episode correct", c, record["error"].as_str().unwrap_or_default())]
            }
            None => vec![],
        };
        Ok(Outcome { checks, export: data })
    }

    async fn close(&mut self) -> Result<(), EnvError> {
        self.client.cancellation_token().cancel();
        Ok(())
    }
}

/// reqwest is built without a default TLS crypto provider (the workspace's choice: rustls with
/// ring, no C build), and a client cannot be built until one is installed: install ring's.
/// This fails only when one is installed already, which serves as well.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
