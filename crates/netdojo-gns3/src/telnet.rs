//! A telnet console: option negotiation answered, data read until a prompt shows, with a
//! timeout (never a fixed sleep).

use std::time::Duration;

use regex::Regex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

const IAC: u8 = 255;
const DONT: u8 = 254;
const DO: u8 = 253;
const WONT: u8 = 252;
const WILL: u8 = 251;
const SB: u8 = 250;
const SE: u8 = 240;
const ECHO: u8 = 1;
const SGA: u8 = 3;

/// The largest output kept for one command: a runaway command cannot fill memory.
pub const OUTPUT_CAP: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("console {addr}: cannot connect: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("console {addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("console {addr}: closed by the device{}", tail_of(.seen))]
    Closed { addr: String, seen: String },
    #[error("console {addr}: no prompt after {waited:?}{}", tail_of(.seen))]
    Timeout { addr: String, waited: Duration, seen: String },
    #[error("console {addr}: output over {OUTPUT_CAP} bytes")]
    TooMuch { addr: String },
}

fn tail_of(seen: &str) -> String {
    let t = seen.trim();
    if t.is_empty() {
        "; nothing was received".into()
    } else {
        let start = t.char_indices().rev().nth(199).map_or(0, |(i, _)| i);
        format!("; last output: {:?}", &t[start..])
    }
}

/// The telnet protocol state between reads: a command can be split across two reads, and
/// each option's state is kept so that only a request that changes it is answered (RFC 854's
/// rule against negotiation loops, as RFC 1143 spells it out). GNS3's console proxy answers
/// every `DO SGA` with `WILL SGA`: acknowledging that again would ping-pong for the whole
/// session, a loop that once took both ends' CPU and made a 40 ms `show ip` take seconds.
#[derive(Debug, Clone)]
pub struct TelnetParser {
    state: State,
    /// Options the peer performs (it said WILL, we said DO).
    his: [bool; 256],
    /// Options we perform (it said DO, we said WILL).
    ours: [bool; 256],
    /// Options already refused once: a repeated request for them is not answered again.
    refused_his: [bool; 256],
    refused_ours: [bool; 256],
}

impl Default for TelnetParser {
    fn default() -> Self {
        Self {
            state: State::Data,
            his: [false; 256],
            ours: [false; 256],
            refused_his: [false; 256],
            refused_ours: [false; 256],
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    #[default]
    Data,
    Iac,
    Option(u8),
    Sub,
    SubIac,
}

impl TelnetParser {
    /// Splits received bytes into data and the replies owed to the peer's negotiation. The
    /// console is a dumb terminal: it lets the device echo and suppress go-ahead, and refuses
    /// every other option.
    pub fn feed(&mut self, input: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut data = Vec::with_capacity(input.len());
        let mut replies = Vec::new();
        for &b in input {
            self.state = match (self.state, b) {
                (State::Data, IAC) => State::Iac,
                (State::Data, b) => {
                    data.push(b);
                    State::Data
                }
                (State::Iac, IAC) => {
                    data.push(IAC);
                    State::Data
                }
                (State::Iac, DO | DONT | WILL | WONT) => State::Option(b),
                (State::Iac, SB) => State::Sub,
                (State::Iac, _) => State::Data,
                (State::Option(verb), option) => {
                    let o = usize::from(option);
                    let answer = match verb {
                        WILL if matches!(option, ECHO | SGA) => {
                            (!std::mem::replace(&mut self.his[o], true)).then_some(DO)
                        }
                        WILL => (!std::mem::replace(&mut self.refused_his[o], true)).then_some(DONT),
                        DO if option == SGA => (!std::mem::replace(&mut self.ours[o], true)).then_some(WILL),
                        DO => (!std::mem::replace(&mut self.refused_ours[o], true)).then_some(WONT),
                        // A switch to off is acknowledged only when the option was on.
                        WONT => std::mem::replace(&mut self.his[o], false).then_some(DONT),
                        DONT => std::mem::replace(&mut self.ours[o], false).then_some(WONT),
                        _ => None,
                    };
                    if let Some(a) = answer {
                        replies.extend([IAC, a, option]);
                    }
                    State::Data
                }
                (State::Sub, IAC) => State::SubIac,
                (State::Sub, _) => State::Sub,
                (State::SubIac, SE) => State::Data,
                (State::SubIac, _) => State::Sub,
            };
        }
        (data, replies)
    }
}

/// One device console.
#[derive(Debug)]
pub struct Console {
    addr: String,
    stream: TcpStream,
    parser: TelnetParser,
    /// Data received and not yet returned.
    pending: String,
}

impl Console {
    pub async fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self, ConsoleError> {
        let addr = format!("{host}:{port}");
        let stream = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
            .await
            .map_err(|_| ConsoleError::Connect {
                addr: addr.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer in {timeout:?}"),
                ),
            })?
            .map_err(|source| ConsoleError::Connect { addr: addr.clone(), source })?;
        let _ = stream.set_nodelay(true);
        Ok(Self { addr, stream, parser: TelnetParser::default(), pending: String::new() })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends one line, ended as a terminal ends it.
    pub async fn send_line(&mut self, line: &str) -> Result<(), ConsoleError> {
        let mut bytes = line.as_bytes().to_vec();
        bytes.extend_from_slice(b"\r\n");
        self.write(&bytes).await
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), ConsoleError> {
        self.stream
            .write_all(bytes)
            .await
            .map_err(|source| ConsoleError::Io { addr: self.addr.clone(), source })
    }

    /// Drops data already received (a banner, a late message) so that the next read starts
    /// with the next command's output.
    pub async fn discard_pending(&mut self) -> Result<(), ConsoleError> {
        loop {
            match tokio::time::timeout(Duration::from_millis(1), self.read_more()).await {
                Ok(Ok(true)) => continue,
                Ok(Ok(false)) => break,
                Ok(Err(e)) => return Err(e),
                Err(_) => break,
            }
        }
        self.pending.clear();
        Ok(())
    }

    /// Reads one chunk; false when the peer closed.
    async fn read_more(&mut self) -> Result<bool, ConsoleError> {
        let mut buf = [0u8; 8192];
        let n = self
            .stream
            .read(&mut buf)
            .await
            .map_err(|source| ConsoleError::Io { addr: self.addr.clone(), source })?;
        if n == 0 {
            return Ok(false);
        }
        let (data, replies) = self.parser.feed(&buf[..n]);
        if !replies.is_empty() {
            self.write(&replies).await?;
        }
        self.pending.push_str(&String::from_utf8_lossy(&data));
        if self.pending.len() > OUTPUT_CAP {
            return Err(ConsoleError::TooMuch { addr: self.addr.clone() });
        }
        Ok(true)
    }

    /// Reads until `prompt` matches at the end of what was received (after trailing spaces),
    /// and returns everything up to the end of the match. The prompt must end the output: a
    /// prompt-like line in the middle of a command's output does not end the read.
    pub async fn read_until_prompt(
        &mut self,
        prompt: &Regex,
        timeout: Duration,
    ) -> Result<String, ConsoleError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(end) = prompt_end(&self.pending, prompt) {
                let out: String = self.pending.drain(..end).collect();
                return Ok(out);
            }
            match tokio::time::timeout_at(deadline, self.read_more()).await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => {
                    return Err(ConsoleError::Closed {
                        addr: self.addr.clone(),
                        seen: std::mem::take(&mut self.pending),
                    });
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return Err(ConsoleError::Timeout {
                        addr: self.addr.clone(),
                        waited: timeout,
                        seen: self.pending.clone(),
                    });
                }
            }
        }
    }

    /// Wakes the console up until it shows a prompt: a fresh console prints nothing (VPCS) or
    /// a boot log (IOS) until Enter is pressed. Presses Enter every `every` until `timeout`.
    pub async fn wait_for_prompt(
        &mut self,
        prompt: &Regex,
        every: Duration,
        timeout: Duration,
    ) -> Result<String, ConsoleError> {
        let deadline = Instant::now() + timeout;
        let mut seen = String::new();
        loop {
            self.send_line("").await?;
            let left = deadline.saturating_duration_since(Instant::now());
            match self.read_until_prompt(prompt, every.min(left)).await {
                Ok(out) => {
                    // More Enters may still be echoed with prompts: drain them.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    self.discard_pending().await?;
                    return Ok(out);
                }
                Err(ConsoleError::Timeout { seen: s, .. }) if Instant::now() < deadline => seen = s,
                Err(ConsoleError::Timeout { .. }) => {
                    return Err(ConsoleError::Timeout { addr: self.addr.clone(), waited: timeout, seen });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs one command: sends it, reads until the prompt, and returns the raw text (echo,
    /// output and the prompt).
    pub async fn command(
        &mut self,
        line: &str,
        prompt: &Regex,
        timeout: Duration,
    ) -> Result<String, ConsoleError> {
        self.discard_pending().await?;
        self.send_line(line).await?;
        self.read_until_prompt(prompt, timeout).await
    }
}

/// Where a prompt ending `text` ends, if one does.
pub fn prompt_end(text: &str, prompt: &Regex) -> Option<usize> {
    let trimmed = text.trim_end_matches([' ', '\t']);
    // Only the last line can hold the prompt.
    let line_start = trimmed.rfind(['\n', '\r']).map_or(0, |i| i + 1);
    let last = &trimmed[line_start..];
    let m = prompt.find(last)?;
    (m.end() == last.len() && m.start() == 0).then_some(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_is_answered_and_stripped() {
        // What GNS3's console proxy sends before VPCS's banner (recorded).
        let raw = b"\xff\xfb\x01\xff\xfb\x03\xff\xfb\x00\xff\xfd\x00\xff\xfd\x01\xff\xfb\x01\xff\xfd\x03\xff\xfb\x03\r\r\nWelcome";
        let mut p = TelnetParser::default();
        let (data, replies) = p.feed(raw);
        assert_eq!(data, b"\r\r\nWelcome");
        // WILL ECHO and WILL SGA come twice: only the first of each is answered.
        assert_eq!(
            replies,
            vec![IAC, DO, ECHO, IAC, DO, SGA, IAC, DONT, 0, IAC, WONT, 0, IAC, WONT, ECHO, IAC, WILL, SGA]
        );
    }

    #[test]
    fn a_peer_that_acknowledges_every_acknowledgement_gets_no_loop() {
        // GNS3's console proxy answers each `DO SGA` with `WILL SGA`, and would again.
        let mut p = TelnetParser::default();
        let (_, first) = p.feed(&[IAC, WILL, SGA]);
        assert_eq!(first, vec![IAC, DO, SGA]);
        let burst = [IAC, WILL, SGA, IAC, DO, SGA, IAC, WILL, 24, IAC, DO, 24];
        let (_, once) = p.feed(&burst);
        assert_eq!(once, vec![IAC, WILL, SGA, IAC, DONT, 24, IAC, WONT, 24]);
        for _ in 0..3 {
            let (_, again) = p.feed(&burst);
            assert!(again.is_empty(), "{again:?}");
        }
        // Off, then on again: each change is answered once.
        let (_, off) = p.feed(&[IAC, WONT, SGA, IAC, WONT, SGA]);
        assert_eq!(off, vec![IAC, DONT, SGA]);
        let (_, on) = p.feed(&[IAC, WILL, SGA]);
        assert_eq!(on, vec![IAC, DO, SGA]);
    }

    #[test]
    fn a_command_split_across_reads_and_subnegotiation_are_handled() {
        let mut p = TelnetParser::default();
        let (d1, r1) = p.feed(b"ab\xff");
        let (d2, r2) = p.feed(b"\xfd\x18cd\xff\xfa\x18\x01\xff\xf0e\xff\xfff");
        assert_eq!(d1, b"ab");
        assert!(r1.is_empty());
        assert_eq!(d2, b"cde\xfff");
        assert_eq!(r2, vec![IAC, WONT, 0x18]);
    }

    #[test]
    fn only_a_prompt_at_the_very_end_counts() {
        let re = Regex::new(r"^\S+[>#] ?$").expect("regex");
        assert_eq!(prompt_end("show\r\nR1#", &re), Some(9));
        assert_eq!(prompt_end("\rVPCS> ", &re), Some(7));
        assert_eq!(prompt_end("R1#\r\nBuilding configuration...", &re), None);
    }
}
