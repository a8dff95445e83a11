//! A device behind its console: logged in, pagination off, one command at a time, and
//! configuration mode entered and left around a batch of configuration commands.

use std::time::Duration;

use serde::Serialize;

use crate::dialect::{CliDialect, clean_output, last_prompt};
use crate::telnet::{Console, ConsoleError};

/// How long one command may run (a VPCS `ping` of 5 packets to a silent host takes ~5 s).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// One command's result in `update-cfg`, as the seed's §4.2 answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandResult {
    pub command: String,
    pub status: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

impl CommandResult {
    fn success(command: &str) -> Self {
        Self { command: command.into(), status: "success", error: String::new() }
    }
    fn error(command: &str, error: impl Into<String>) -> Self {
        Self { command: command.into(), status: "error", error: error.into() }
    }
}

/// A logged-in device console.
#[derive(Debug)]
pub struct Device {
    name: String,
    dialect: CliDialect,
    console: Console,
}

impl Device {
    /// Connects to a console, waits for the device's prompt (pressing Enter every second until
    /// `boot_timeout`), enters privileged mode and turns pagination off.
    pub async fn open(
        name: &str,
        dialect: CliDialect,
        host: &str,
        port: u16,
        boot_timeout: Duration,
    ) -> Result<Self, ConsoleError> {
        let mut console = Console::connect(host, port, Duration::from_secs(5)).await?;
        let prompt = dialect.prompt();
        let seen = console.wait_for_prompt(prompt, Duration::from_secs(1), boot_timeout).await?;
        let mut device = Self { name: name.into(), dialect, console };
        if dialect.needs_enable(last_prompt(&seen)) {
            device.console.command("enable", prompt, COMMAND_TIMEOUT).await?;
        }
        for c in dialect.session_setup() {
            device.console.command(c, prompt, COMMAND_TIMEOUT).await?;
        }
        Ok(device)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dialect(&self) -> CliDialect {
        self.dialect
    }

    /// Runs one command and returns its output (without echo and prompt), and the prompt.
    pub async fn run(&mut self, command: &str) -> Result<(String, String), ConsoleError> {
        // Debian's VPCS 0.5b2 dies (`malloc(): corrupted top size`) when it pings or traces
        // without an address: such a command is not sent, and the answer says why.
        if self.dialect == CliDialect::Vpcs
            && matches!(command.split_whitespace().next(), Some("ping" | "trace"))
        {
            let (show, prompt) = self.run_raw("show ip").await?;
            if self.dialect.running_config(&show).is_empty() {
                return Ok((
                    "not sent: this host has no IP address (VPCS 0.5b2 crashes on ping or trace without one)"
                        .into(),
                    prompt,
                ));
            }
        }
        self.run_raw(command).await
    }

    async fn run_raw(&mut self, command: &str) -> Result<(String, String), ConsoleError> {
        let raw = self.console.command(command, self.dialect.prompt(), COMMAND_TIMEOUT).await?;
        Ok((clean_output(&raw, command), last_prompt(&raw).to_string()))
    }

    /// The running configuration.
    pub async fn running_config(&mut self) -> Result<String, ConsoleError> {
        let (out, _) = self.run(self.dialect.running_config_command()).await?;
        Ok(self.dialect.running_config(&out))
    }

    /// Applies configuration commands in order, each answered with `success` or the device's
    /// own error; a failing command does not stop the ones after it (as when a configuration
    /// is pasted into a terminal). IOS is put in configuration mode first and back in
    /// privileged mode at the end; a command that leaves configuration mode (`exit` at the
    /// top) is followed by `configure terminal` again.
    pub async fn configure(&mut self, commands: &[String]) -> Result<Vec<CommandResult>, ConsoleError> {
        let dialect = self.dialect;
        let mut results = Vec::with_capacity(commands.len());
        let mut in_config = dialect == CliDialect::Vpcs;
        for command in commands {
            if dialect.is_framing(command) {
                results.push(CommandResult::success(command));
                continue;
            }
            if let Some(why) = dialect.refuse_config(command) {
                results.push(CommandResult::error(command, format!("refused: {why}")));
                continue;
            }
            if !in_config {
                let (out, prompt) = self.run("configure terminal").await?;
                if !dialect.in_config_mode(&prompt) {
                    results.push(CommandResult::error(
                        command,
                        format!("the device did not enter configuration mode: {out}"),
                    ));
                    continue;
                }
            }
            let (out, prompt) = self.run(command.trim()).await?;
            in_config = dialect.in_config_mode(&prompt);
            results.push(match dialect.error_in(&out) {
                Some(e) => CommandResult::error(command, e),
                None => CommandResult::success(command),
            });
        }
        if dialect == CliDialect::Ios && in_config {
            self.run("end").await?;
        }
        Ok(results)
    }
}
