//! The report served from memory over HTTP (`cargo xtask view`): GET and HEAD of the site's
//! files, nothing else. The caller binds the listener, on 127.0.0.1.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::Site;

/// The longest request head read; a browser's is a few hundred bytes.
const MAX_HEAD: usize = 16 * 1024;

/// Answers every connection, each on its own thread, until the listener fails.
pub fn serve(site: &Site, listener: &TcpListener) -> io::Result<()> {
    std::thread::scope(|scope| {
        for stream in listener.incoming() {
            let stream = stream?;
            scope.spawn(move || {
                // A client that goes away mid-answer is its own business.
                let _ = answer(site, stream);
            });
        }
        Ok(())
    })
}

fn answer(site: &Site, mut stream: TcpStream) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return respond(&mut stream, "400 Bad Request", "text/plain", b"bad request\n", true);
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let mut parts = line.lines().next().unwrap_or_default().split(' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let with_body = method != "HEAD";
    if method != "GET" && method != "HEAD" {
        return respond(&mut stream, "405 Method Not Allowed", "text/plain", b"GET or HEAD only\n", true);
    }
    let path = target.split(['?', '#']).next().unwrap_or_default();
    let Some(mut path) = percent_decode(path.trim_start_matches('/')) else {
        return respond(&mut stream, "400 Bad Request", "text/plain", b"bad path\n", with_body);
    };
    if path.is_empty() || path.ends_with('/') {
        path.push_str("index.html");
    }
    match site.files.get(&path) {
        Some(bytes) => respond(&mut stream, "200 OK", content_type(&path), bytes, with_body),
        None => respond(&mut stream, "404 Not Found", "text/plain", b"not found\n", with_body),
    }
}

fn respond(stream: &mut TcpStream, status: &str, kind: &str, body: &[u8], with_body: bool) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if with_body {
        stream.write_all(body)?;
    }
    stream.flush()
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}

/// `%XX` sequences to bytes; `None` for a broken sequence or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(request.as_bytes()).expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn serves_the_sites_files_and_nothing_else() {
        let mut site = Site::default();
        site.files.insert("index.html".into(), b"<p>home</p>".to_vec());
        site.files.insert("r0/a%2Fb.html".into(), b"<p>episode</p>".to_vec());
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || serve(&site, &listener));

        let home = get(addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(home.starts_with("HTTP/1.1 200 OK") && home.ends_with("<p>home</p>"), "{home}");
        assert!(home.contains("text/html"), "{home}");
        // The link to a task id with a `/` (file a%2Fb.html) has the `%` escaped.
        let ep = get(addr, "GET /r0/a%252Fb.html HTTP/1.1\r\n\r\n");
        assert!(ep.ends_with("<p>episode</p>"), "{ep}");
        assert!(get(addr, "GET /../config.json HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(addr, "POST / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        let head = get(addr, "HEAD / HTTP/1.1\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200") && !head.contains("home"), "{head}");
    }
}
