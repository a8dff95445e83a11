//! A scripted HTTP/1.1 server on 127.0.0.1 for tests of what a real server will not do on
//! demand: answer garbage, fail with 503, cut a stream, or speak Ollama's API where no Ollama
//! can run. It records every request. Not a proof that an agent works with a real server: the
//! OpenAI agent's tests use llama.cpp's for that.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum StubReply {
    /// A whole response.
    Full { status: u16, headers: Vec<(String, String)>, body: String },
    /// Lines written one by one (NDJSON), `delay` apart, then the connection is closed (leave
    /// out the `done` line to play a server that crashed mid-stream).
    Stream { lines: Vec<String>, delay: Duration },
}

impl StubReply {
    pub fn json(status: u16, body: &Value) -> Self {
        StubReply::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }

    pub fn text(status: u16, body: &str) -> Self {
        StubReply::Full {
            status,
            headers: vec![("content-type".into(), "text/html".into())],
            body: body.into(),
        }
    }

    pub fn ndjson(lines: &[Value]) -> Self {
        StubReply::Stream {
            lines: lines.iter().map(Value::to_string).collect(),
            delay: Duration::from_millis(5),
        }
    }
}

/// A request the stub received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Debug)]
pub struct StubServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: JoinHandle<()>,
}

impl StubServer {
    /// Serves `replies` in order, one per request; the last one again once they run out.
    pub async fn start(replies: Vec<StubReply>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let task = tokio::spawn(async move {
            let mut n = 0usize;
            while let Ok((stream, _)) = listener.accept().await {
                let reply = replies.get(n).or(replies.last()).cloned();
                n += 1;
                let seen = seen.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, reply, seen).await;
                });
            }
        });
        Ok(Self { url, requests, task })
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut stream: TcpStream,
    reply: Option<StubReply>,
    seen: Arc<Mutex<Vec<Recorded>>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let method = first.next().unwrap_or_default().to_string();
    let path = first.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    if let Ok(mut r) = seen.lock() {
        r.push(Recorded { method, path, headers, body: String::from_utf8_lossy(&body).into() });
    }
    match reply {
        None => Ok(()),
        Some(StubReply::Full { status, headers, body }) => {
            let mut out =
                format!("HTTP/1.1 {status} STUB\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
            for (k, v) in headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            out.push_str(&body);
            stream.write_all(out.as_bytes()).await?;
            stream.shutdown().await
        }
        Some(StubReply::Stream { lines, delay }) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            for line in lines {
                stream.write_all(format!("{line}\n").as_bytes()).await?;
                stream.flush().await?;
                tokio::time::sleep(delay).await;
            }
            stream.shutdown().await
        }
    }
}
