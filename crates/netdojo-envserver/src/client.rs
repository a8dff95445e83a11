//! A minimal OpenEnv WebSocket client in Rust, for the benchmark and the tests: the requests
//! `MCPToolClient` sends, and the answers as JSON.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to {url}: {source}")]
    Connect { url: String, source: Box<tokio_tungstenite::tungstenite::Error> },
    #[error("the WebSocket failed: {0}")]
    Socket(Box<tokio_tungstenite::tungstenite::Error>),
    #[error("the server closed the session")]
    Closed,
    #[error("the server answered something that is not JSON: {0}")]
    NotJson(String),
    #[error("server error {code}: {message}")]
    Server { code: String, message: String },
}

/// One session.
#[derive(Debug)]
pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Client {
    /// Connects to `ws://HOST:PORT/ws` (`base` is `http://HOST:PORT` or `ws://HOST:PORT`).
    pub async fn connect(base: &str) -> Result<Self, ClientError> {
        let url = format!("{}/ws", base.trim_end_matches('/').replacen("http://", "ws://", 1));
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .map_err(|e| ClientError::Connect { url, source: Box::new(e) })?;
        Ok(Self { ws })
    }

    /// Sends one request and returns the answer's `data`; an error answer is an `Err`.
    pub async fn request(&mut self, message: &Value) -> Result<Value, ClientError> {
        self.ws
            .send(Message::text(message.to_string()))
            .await
            .map_err(|e| ClientError::Socket(Box::new(e)))?;
        loop {
            let answer = match self.ws.next().await {
                None => return Err(ClientError::Closed),
                Some(Err(e)) => return Err(ClientError::Socket(Box::new(e))),
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Close(_))) => return Err(ClientError::Closed),
                Some(Ok(_)) => continue,
            };
            let value: Value = serde_json::from_str(answer.as_str())
                .map_err(|_| ClientError::NotJson(answer.to_string()))?;
            if value["type"] == "error" {
                return Err(ClientError::Server {
                    code: value["data"]["code"].as_str().unwrap_or_default().to_string(),
                    message: value["data"]["message"].as_str().unwrap_or_default().to_string(),
                });
            }
            return Ok(value["data"].clone());
        }
    }

    /// `reset` with `data` (`{"task_id": ...}`, `{"seed": ...}`, `{}`).
    pub async fn reset(&mut self, data: Value) -> Result<Value, ClientError> {
        self.request(&json!({"type": "reset", "data": data})).await
    }

    /// One tool call.
    pub async fn call(&mut self, tool: &str, arguments: Value) -> Result<Value, ClientError> {
        self.request(&json!({"type": "step", "data": {"type": "call_tool", "tool_name": tool, "arguments": arguments}}))
            .await
    }

    pub async fn list_tools(&mut self) -> Result<Value, ClientError> {
        self.request(&json!({"type": "step", "data": {"type": "list_tools"}})).await
    }

    pub async fn state(&mut self) -> Result<Value, ClientError> {
        self.request(&json!({"type": "state"})).await
    }

    /// Sends `close` and closes the socket.
    pub async fn close(mut self) {
        let _ = self.ws.send(Message::text(json!({"type": "close"}).to_string())).await;
        let _ = self.ws.close(None).await;
    }
}
