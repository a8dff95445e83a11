//! The sandbox that runs one command of an untrusted agent inside one node's network namespace.
//!
//! There is no shell anywhere on this path. A line is split into words with POSIX-like quoting
//! ([`shlex`]), checked, and run as exactly one program in the kernel's jail
//! (`netdojo-jail --profile agent --net /run/netns/NODE -- /abs/path/PROGRAM ARGS...`), with a
//! cleared environment, `/` as working directory, stdin closed, a time limit and an output cap.
//! The checks are the first wall and explain refusals; the jail is the second and holds without
//! them (docs/security.md): a word the checks miss still reaches nothing outside the node.
//!
//! The checks ([`parse`]) are deliberately narrower than what the tools would accept, because
//! every tool on the allow-list can be talked into leaving the node's namespace or touching the
//! host when given the right option:
//!
//! - only bare program names from [`ALLOWED`], resolved in [`BIN_DIRS`], never `$PATH`;
//! - no shell syntax at all (metacharacters are refused even inside quotes, so what the agent
//!   reads back is what ran);
//! - no file paths: a word may contain `/` only as an address prefix or mask (`10.0.0.0/24`,
//!   `10.0.0.0/255.0.0.0`) or a rate (`5/min`), and the child runs in `/`, so a bare file name
//!   refers to nothing useful either;
//! - per tool, the options that switch namespace (`ip -n`, `ss -N`, `ip link set .. netns`),
//!   read or write files (`nft -f`, `ip -batch`, `sysctl -p`, `iptables-save -f`), run another
//!   program (`ip netns exec`, `ip vrf exec`, `tc exec`, `iptables --modprobe`) or change the
//!   host (`sysctl kernel.*`, `hostname NAME`) are refused. Options are matched the way each
//!   tool matches them: iproute2 accepts any prefix of an option (`-n`, `-ne`, `-net` all mean
//!   `-netns`; `ip net` is `ip netns`), getopt accepts clustered short options (`-wp`) and
//!   unambiguous abbreviations of long ones (`--fi` is `--file`).
//!
//! What neither wall isolates is listed in docs/security.md: the kernel log (an iptables/nft
//! `LOG` rule writes to the host's `dmesg`) and kernel module auto-loading triggered by creating
//! a link of a new type.

use std::fmt;
use std::fs;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// The longest command line accepted, in bytes.
pub const MAX_LINE: usize = 4096;

/// Where programs are looked up, in order. `$PATH` is never consulted.
pub const BIN_DIRS: &[&str] = &["/usr/sbin", "/usr/bin", "/sbin", "/bin"];

/// The programs an agent may run, by bare name.
pub const ALLOWED: &[&str] = &[
    "ip",
    "ifconfig",
    "route",
    "iptables",
    "iptables-save",
    "ip6tables",
    "ip6tables-save",
    "nft",
    "sysctl",
    "tc",
    "arp",
    "ethtool",
    "bridge",
    "ss",
    "netstat",
    "hostname",
];

/// Reachability tools: the environment measures reachability itself (the pingmesh), and a
/// probe of our own must not be mistaken for the agent's.
const PING_LIKE: &[&str] = &[
    "ping",
    "ping4",
    "ping6",
    "traceroute",
    "traceroute6",
    "tracepath",
    "tracepath6",
    "mtr",
    "arping",
    "fping",
];

/// Named explicitly so the agent is not told to look for them in the allow-list.
const NOT_PERMITTED: &[&str] = &["vtysh"];

/// Shell syntax. None of it means anything here, and accepting it quoted would let the agent
/// believe a pipeline or a substitution ran.
const SHELL_META: &[char] = &[';', '|', '&', '$', '`', '<', '>', '(', ')', '*', '?', '{', '}'];

/// The environment of every child: nothing inherited from the evaluator.
const CHILD_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// How long a killed child may take to be reaped before we stop waiting for it.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// Longest token quoted back in a refusal; the rest is elided to keep the message one line
/// of reasonable length.
const SHOWN_TOKEN: usize = 60;

/// Limits on one command.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Wall-clock limit; the command (and its process group) is killed when it expires.
    pub timeout: Duration,
    /// The most bytes of output kept (stdout then stderr); the rest is counted and dropped.
    /// While the command runs, at most this much is held per stream.
    pub output_cap: usize,
}

impl Default for Policy {
    /// 5 s and 64 KiB.
    fn default() -> Self {
        Self { timeout: Duration::from_secs(5), output_cap: 64 * 1024 }
    }
}

/// Why a command was refused; `Display` is the one-line message shown to the agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("refused: empty command; send one command, such as `ip route`")]
    Empty,
    #[error("refused: the command is {len} bytes long; the limit is {MAX_LINE} bytes")]
    TooLong { len: usize },
    #[error("refused: the command contains a NUL byte")]
    NulByte,
    #[error("refused: the command contains a line break; there is no shell here: one command runs per step")]
    LineBreak,
    #[error("refused: the command contains control character U+{code:04X}")]
    ControlChar { code: u32 },
    #[error("refused: the command contains non-ASCII character U+{code:04X}; commands are plain ASCII")]
    NonAscii { code: u32 },
    #[error("refused: unbalanced quote (or a trailing backslash) in the command line")]
    UnbalancedQuote,
    #[error(
        "refused: `{token}`: `{ch}` is shell syntax; there is no shell here: one command runs per \
         step, with no pipes, lists, redirects, substitutions, globs or comments"
    )]
    ShellMeta { token: String, ch: char },
    #[error("refused: `{token}`: give the bare command name (such as `ip`), not a path")]
    ProgramPath { token: String },
    #[error("refused: `{program}` is not an allowed command; allowed: {}", ALLOWED.join(", "))]
    NotAllowed { program: String },
    #[error("refused: `{program}`: the pingmesh is provided after every step; ping is not available")]
    PingUnavailable { program: String },
    #[error("refused: `{program}` is not permitted")]
    NotPermitted { program: String },
    #[error("refused: `{program}` is allowed but not installed here")]
    NotInstalled { program: String },
    #[error(
        "refused: `{token}` looks like a file path; `/` is allowed only in an address with a prefix \
         length or mask (10.0.0.0/24) or a rate (5/min), and there are no files to use"
    )]
    PathArgument { token: String },
    /// `means`: the keyword the tool reads `token` as, when it is an abbreviation of one
    /// (`link-net` is `link-netns`); empty otherwise.
    #[error(
        "refused: `{token}`{} would make `{program}` act on another network namespace; \
         commands always run in this node's own namespace",
        read_as(program, token, means)
    )]
    NamespaceEscape { program: String, token: String, means: String },
    #[error(
        "refused: `{token}`{} would make `{program}` read or write a file; there are no files to use",
        read_as(program, token, means)
    )]
    FileAccess { program: String, token: String, means: String },
    #[error(
        "refused: `{token}`{} would make `{program}` run another program",
        read_as(program, token, means)
    )]
    RunsProgram { program: String, token: String, means: String },
    #[error(
        "refused: sysctl key `{key}` is outside `net.`; only this node's own net.* keys may be \
         read or written"
    )]
    SysctlKey { key: String },
    #[error(
        "refused: sysctl key `{key}` is not this node's own: {why}; only the net.* keys the kernel \
         keeps per network namespace may be written"
    )]
    SysctlHostWide { key: String, why: String },
    #[error("refused: `{token}`{} of `{program}` is not permitted: {why}", read_as(program, token, means))]
    OptionNotPermitted { program: String, token: String, means: String, why: &'static str },
}

/// ` (ip reads it as `link-netns`)` when the agent wrote an abbreviation: the refusal then
/// names what the tool would have done, not only what the agent typed.
fn read_as(program: &str, token: &str, means: &str) -> String {
    if means.is_empty() || means == token {
        String::new()
    } else {
        format!(" ({program} reads it as `{means}`)")
    }
}

/// The token as quoted back to the agent: long ones are elided so the message stays readable.
fn shown(token: &str) -> String {
    if token.chars().count() <= SHOWN_TOKEN {
        token.to_string()
    } else {
        let head: String = token.chars().take(SHOWN_TOKEN).collect();
        format!("{head}...")
    }
}

/// A command that passed the checks: absolute binary path + args.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    // Private: the only way to get a `Command` is `parse`, so `run` never executes anything
    // that has not passed the checks.
    program: PathBuf,
    args: Vec<String>,
}

impl Command {
    /// Absolute path of the program, in one of [`BIN_DIRS`].
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Its arguments, as the agent wrote them after unquoting.
    pub fn args(&self) -> &[String] {
        &self.args
    }
}

impl fmt::Display for Command {
    /// The command as a shell-quoted line with the program's bare name, for logs and traces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name =
            self.program.file_name().map_or_else(|| self.program.to_string_lossy(), |n| n.to_string_lossy());
        f.write_str(&name)?;
        for arg in &self.args {
            match shlex::try_quote(arg) {
                Ok(quoted) => write!(f, " {quoted}")?,
                Err(_) => write!(f, " {arg:?}")?,
            }
        }
        Ok(())
    }
}

/// What a command printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The exit code; `None` when it was killed (time limit) or died of a signal.
    pub status: Option<i32>,
    /// Stdout then stderr, capped at [`Policy::output_cap`] bytes, followed by a
    /// `[output truncated: N bytes omitted]` line and a `[timed out after ..]` line when they
    /// apply. Invalid UTF-8 is replaced.
    pub text: String,
    /// The time limit expired and the command was killed; `text` holds what it printed before.
    pub timed_out: bool,
    /// Some output was dropped because of the cap.
    pub truncated: bool,
}

/// Environment failures while running a command that passed the checks: the evaluator's
/// problem, never the agent's.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("`{0}` is not a usable network namespace name")]
    BadNamespaceName(String),
    #[error("network namespace {name}: {source}")]
    Namespace {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("{name} is not a network namespace (nothing is mounted on /run/netns/{name})")]
    NotANamespace { name: String },
    #[error("network namespace {name} is the host's own; agent commands never run there")]
    HostNamespace { name: String },
    #[error(transparent)]
    NoJail(netdojo_jail::NotFound),
    #[error("{0}")]
    Sysctls(String),
    #[error("the jail of `{command}` could not be set up: {message}")]
    Jail { command: String, message: String },
    #[error("starting {}: {source}", .program.display())]
    Spawn {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the child process has no {0} pipe")]
    NoPipe(&'static str),
    #[error("reading the output of {command}: {source}")]
    Read {
        command: String,
        #[source]
        source: io::Error,
    },
    #[error("waiting for {command}: {source}")]
    Wait {
        command: String,
        #[source]
        source: io::Error,
    },
}

/// Checks an agent's command line and resolves its program. Refuses anything that is not one
/// plain invocation of an allowed tool confined to the node's namespace; see the module docs.
pub fn parse(line: &str) -> Result<Command, Refusal> {
    let command = parse_with(line, resolve)?;
    check_sysctl_writes(&command, |key| crate::sysctl::probe().map(|known| known.writable(key)))?;
    Ok(command)
}

/// A command of the operator's own (a task file's testcase, such as `ping -c 1 10.0.0.2`), split
/// without a shell and resolved in [`BIN_DIRS`] but not held to the agent's allow-list: it must
/// never carry anything an agent wrote. It still runs through [`run`], so it is contained in
/// its node's namespace with the same time limit and output cap.
pub fn trusted(line: &str) -> Result<Command, Refusal> {
    let words = split(line.trim_ascii())?;
    let Some((program, args)) = words.split_first() else {
        return Err(Refusal::Empty);
    };
    let path = resolve(program).ok_or_else(|| Refusal::NotInstalled { program: program.clone() })?;
    Ok(Command { program: path, args: args.to_vec() })
}

/// [`parse`] with the program lookup passed in, so the checks can be tested without the tools.
fn parse_with(line: &str, resolve: impl Fn(&str) -> Option<PathBuf>) -> Result<Command, Refusal> {
    if line.len() > MAX_LINE {
        return Err(Refusal::TooLong { len: line.len() });
    }
    // A trailing newline is how many clients end a command; it cannot start a second one.
    let line = line.trim_ascii();
    if line.is_empty() {
        return Err(Refusal::Empty);
    }
    check_chars(line)?;
    let words = split(line)?;
    let nft = words.first().is_some_and(|p| p == "nft");
    for (i, word) in words.iter().enumerate() {
        check_shell_meta(word, nft && i > 0)?;
    }
    let Some((program, args)) = words.split_first() else {
        return Err(Refusal::Empty);
    };
    check_program(program)?;
    for arg in args {
        check_slash(arg)?;
    }
    check_args(program, args)?;
    // Looked up last, so a hostile line is refused for what it is even where the tool is missing.
    let path = resolve(program).ok_or_else(|| Refusal::NotInstalled { program: program.clone() })?;
    Ok(Command { program: path, args: args.to_vec() })
}

fn check_chars(line: &str) -> Result<(), Refusal> {
    if line.contains('\0') {
        return Err(Refusal::NulByte);
    }
    for ch in line.chars() {
        match ch {
            '\n' | '\r' => return Err(Refusal::LineBreak),
            '\t' => {}
            c if c.is_control() => return Err(Refusal::ControlChar { code: u32::from(c) }),
            // Non-ASCII buys nothing for network commands and hides lookalikes: a Cyrillic `і`
            // in `іp`, a fullwidth `；`, a no-break space that does not split words, bidi
            // overrides that make the line read differently from how it runs.
            c if !c.is_ascii() => return Err(Refusal::NonAscii { code: u32::from(c) }),
            _ => {}
        }
    }
    Ok(())
}

fn split(line: &str) -> Result<Vec<String>, Refusal> {
    let words = shlex::split(line).ok_or(Refusal::UnbalancedQuote)?;
    // shlex drops an unquoted `# comment`: a `#` that vanished was one. Silently running less
    // than the agent wrote would mislead it, so it is refused like the rest of shell syntax.
    let before = line.matches('#').count();
    let after: usize = words.iter().map(|w| w.matches('#').count()).sum();
    if after < before {
        return Err(Refusal::ShellMeta { token: "#".to_string(), ch: '#' });
    }
    Ok(words)
}

/// `nft_script`: an argument of `nft`, which joins its arguments into one nftables script in
/// which braces and `;` are syntax (chain and set bodies, statement separators). With no shell
/// they reach nft as they are, and nft runs in the node's namespace like any other command.
fn check_shell_meta(word: &str, nft_script: bool) -> Result<(), Refusal> {
    let nft_syntax = |c: &char| nft_script && matches!(c, '{' | '}' | ';');
    if let Some(ch) = word.chars().find(|c| SHELL_META.contains(c) && !nft_syntax(c)) {
        return Err(Refusal::ShellMeta { token: shown(word), ch });
    }
    if word.starts_with('~') {
        return Err(Refusal::ShellMeta { token: shown(word), ch: '~' });
    }
    Ok(())
}

fn check_program(program: &str) -> Result<(), Refusal> {
    if program.contains('/') {
        return Err(Refusal::ProgramPath { token: shown(program) });
    }
    if ALLOWED.contains(&program) {
        return Ok(());
    }
    let program = shown(program);
    if PING_LIKE.contains(&program.as_str()) {
        Err(Refusal::PingUnavailable { program })
    } else if NOT_PERMITTED.contains(&program.as_str()) {
        Err(Refusal::NotPermitted { program })
    } else {
        Err(Refusal::NotAllowed { program })
    }
}

/// A word may hold `/` only when it cannot name a file: address prefixes, masks and rates,
/// alone or in a comma-separated list (`iptables -s a/24,b/24`).
fn check_slash(word: &str) -> Result<(), Refusal> {
    if !word.contains('/') || word.split(',').all(|part| is_address_prefix(part) || is_rate(part)) {
        Ok(())
    } else {
        Err(Refusal::PathArgument { token: shown(word) })
    }
}

fn is_address_prefix(part: &str) -> bool {
    let Some((addr, len)) = part.split_once('/') else {
        return false;
    };
    let prefix =
        |max: u8| len.bytes().all(|b| b.is_ascii_digit()) && len.parse::<u8>().is_ok_and(|n| n <= max);
    match addr.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => prefix(32) || len.parse::<Ipv4Addr>().is_ok(),
        Ok(IpAddr::V6(_)) => prefix(128),
        Err(_) => false,
    }
}

/// `5/min`, `10/second`, `mbytes/second` (iptables `limit`/`hashlimit`, nft `limit rate`).
/// A leading digit (or a byte unit) keeps it from naming anything under `/`.
fn is_rate(part: &str) -> bool {
    const UNITS: &[&str] = &["s", "sec", "second", "m", "min", "minute", "h", "hour", "d", "day", "week"];
    const BYTE_UNITS: &[&str] = &["bytes", "kbytes", "mbytes"];
    let Some((count, unit)) = part.split_once('/') else {
        return false;
    };
    let count_ok = (count.starts_with(|c: char| c.is_ascii_digit())
        && count.bytes().all(|b| b.is_ascii_alphanumeric()))
        || BYTE_UNITS.contains(&count);
    count_ok && UNITS.contains(&unit)
}

/// What an option would do that gets it refused.
#[derive(Debug, Clone, Copy)]
enum Deny {
    Namespace,
    File,
    Program,
    Other(&'static str),
}

impl Deny {
    fn refuse(self, program: &str, token: &str) -> Refusal {
        self.refuse_as(program, token, "")
    }

    /// `means`: the keyword `token` abbreviates, named in the message.
    fn refuse_as(self, program: &str, token: &str, means: &str) -> Refusal {
        let (program, token, means) = (program.to_string(), shown(token), means.to_string());
        match self {
            Deny::Namespace => Refusal::NamespaceEscape { program, token, means },
            Deny::File => Refusal::FileAccess { program, token, means },
            Deny::Program => Refusal::RunsProgram { program, token, means },
            Deny::Other(why) => Refusal::OptionNotPermitted { program, token, means, why },
        }
    }
}

fn check_args(program: &str, args: &[String]) -> Result<(), Refusal> {
    match program {
        "ip" => check_ip(args),
        "tc" => check_tc(args),
        "bridge" => check_bridge(args),
        "nft" => check_nft(args),
        "sysctl" => check_sysctl(args),
        "ethtool" => check_ethtool(args),
        // `-m bpf --object-pinned PATH` (libxt_bpf) opens a pinned BPF object.
        "iptables" | "ip6tables" => check_getopt(
            program,
            args,
            &[],
            &[("modprobe", Deny::Program), ("object-pinned", Deny::File)],
        ),
        "iptables-save" | "ip6tables-save" => check_getopt(
            program,
            args,
            &[('f', Deny::File), ('M', Deny::Program)],
            &[("file", Deny::File), ("modprobe", Deny::Program)],
        ),
        "arp" => check_getopt(program, args, &[('f', Deny::File)], &[("file", Deny::File)]),
        "ss" => check_getopt(
            program,
            args,
            &[('N', Deny::Namespace), ('F', Deny::File), ('D', Deny::File)],
            &[("net", Deny::Namespace), ("filter", Deny::File), ("diag", Deny::File)],
        ),
        "hostname" => match args.first() {
            Some(arg) => Err(Deny::Other(
                "hostname is read-only here: the name belongs to the host, not to this node; run it without arguments",
            )
            .refuse(program, arg)),
            None => Ok(()),
        },
        // ifconfig, route, netstat: no option of theirs reaches a file, a program or another
        // namespace.
        _ => Ok(()),
    }
}

/// iproute2 global options that are refused: (option, shortest prefix iproute2 takes for it,
/// why). iproute2 matches any prefix of an option name and treats `--x` as `-x`.
type IprouteOptions = &'static [(&'static str, usize, Deny)];

const IP_OPTIONS: IprouteOptions = &[
    ("-netns", 2, Deny::Namespace),
    ("-all", 2, Deny::Namespace),
    ("-batch", 2, Deny::File),
    // `-f` and `-fa` are `-family`, which ip tests first.
    ("-force", 3, Deny::Other("it only applies to -batch")),
];

const TC_OPTIONS: IprouteOptions = &[
    ("-netns", 2, Deny::Namespace),
    ("-batch", 2, Deny::File),
    ("-force", 2, Deny::Other("it only applies to -batch")),
    // tc reads class names from this file; `-c` alone is taken as `-conf`.
    ("-conf", 2, Deny::File),
    ("-cf", 3, Deny::File),
];

const BRIDGE_OPTIONS: IprouteOptions = &[
    ("-netns", 2, Deny::Namespace),
    ("-batch", 2, Deny::File),
    ("-force", 3, Deny::Other("it only applies to -batch")),
];

/// Checks every dash word, wherever it is: a refused option means nothing later in a command
/// line, so refusing it everywhere costs nothing and needs no model of where options end.
fn check_iproute_options(program: &str, args: &[String], options: IprouteOptions) -> Result<(), Refusal> {
    for arg in args {
        let Some(rest) = arg.strip_prefix('-') else { continue };
        let opt = if rest.starts_with('-') { rest } else { arg.as_str() };
        for &(name, shortest, deny) in options {
            if opt.len() >= shortest && name.starts_with(opt) {
                return Err(deny.refuse_as(program, arg, name));
            }
        }
    }
    Ok(())
}

/// A keyword an iproute2 tool refuses, and which of its spellings reach it.
///
/// iproute2 matches most keywords with `matches(arg, keyword)` (lib/utils.c): any non-empty
/// prefix of the keyword is the keyword, unless a keyword tested earlier at the same place takes
/// it first (`link` in `ip link add .. link DEV` comes before `link-netns`, so `link-` is the
/// shortest spelling of `link-netns`). `shortest` is that length, read from iproute2 6.1's
/// parsers; a keyword matched with `strcmp` has `shortest == keyword.len()`.
///
/// A refused word is refused wherever it stands: modelling each parser's grammar would be a
/// second copy of iproute2 to keep in step, while a shortest spelling that no command an agent
/// needs uses costs nothing.
#[derive(Debug, Clone, Copy)]
struct Keyword {
    keyword: &'static str,
    shortest: usize,
    deny: Deny,
}

const fn kw(keyword: &'static str, shortest: usize, deny: Deny) -> Keyword {
    Keyword { keyword, shortest, deny }
}

const NO_BPF: Deny = Deny::Other("BPF programs are not available here");

/// The files of a BPF program (lib/bpf_legacy.c `bpf_parse_string`): `object-file` (`obj`
/// exact), `object-pinned`/`pinned`/`fd` (a pinned path), `bytecode-file` (`bcf` exact), and
/// `export` (a UNIX socket path). `o`, `ob`, `p`, `f`, `e` also reach them after `bpf`/`xdp`,
/// which are refused themselves; the table refuses the longer spellings wherever they stand.
const BPF_FILE_WORDS: [Keyword; 6] = [
    kw("object-file", 3, Deny::File),
    kw("object-pinned", 7, Deny::File),
    kw("bytecode-file", 9, Deny::File),
    kw("bcf", 3, Deny::File),
    kw("pinned", 2, Deny::File),
    kw("export", 3, Deny::File),
];

/// `ip`'s refused keywords. `f` alone (`ip monitor f NAME`, `ip xfrm monitor f NAME`) is checked
/// by [`monitor_file`], since `f` elsewhere is harmless (`ip f` is `ip fou`).
const IP_WORDS: &[Keyword] = &[
    // `ip net`, `ip netn` (ip.c: `n`, `ne` are `neigh`, which comes first); `netns` in
    // `ip link set .. netns NS` is strcmp.
    kw("netns", 3, Deny::Namespace),
    // iplink.c: matches, after `link` (any prefix), so `link-` is the shortest.
    kw("link-netns", 5, Deny::Namespace),
    kw("link-netnsid", 11, Deny::Namespace),
    // ipmonitor.c, xfrm_monitor.c: matches, after strcmp `all` and matches `address`.
    kw("all-nsid", 4, Deny::Namespace),
    // ipnetns.c (strcmp, under `ip netns`, refused anyway).
    kw("target-nsid", 11, Deny::Namespace),
    // `ip netns exec`, `ip vrf exec`: matches.
    kw("exec", 1, Deny::Program),
    // ipmonitor.c, xfrm_monitor.c `file`: matches; `f` is left to `monitor_file`.
    kw("file", 2, Deny::File),
    BPF_FILE_WORDS[0],
    BPF_FILE_WORDS[1],
    BPF_FILE_WORDS[2],
    BPF_FILE_WORDS[3],
    BPF_FILE_WORDS[4],
    BPF_FILE_WORDS[5],
    // iplink.c (strcmp) and iproute_lwtunnel.c `encap bpf` (strcmp): where a program is loaded.
    kw("xdp", 3, NO_BPF),
    kw("xdpgeneric", 10, NO_BPF),
    kw("xdpdrv", 6, NO_BPF),
    kw("xdpoffload", 10, NO_BPF),
    kw("bpf", 3, NO_BPF),
];

const TC_WORDS: &[Keyword] = &[
    // tc.c: `tc exec` (matches; `e` is exec).
    kw("exec", 1, Deny::Program),
    // tc_monitor.c `file`: matches.
    kw("file", 2, Deny::File),
    BPF_FILE_WORDS[0],
    BPF_FILE_WORDS[1],
    BPF_FILE_WORDS[2],
    BPF_FILE_WORDS[3],
    BPF_FILE_WORDS[4],
    BPF_FILE_WORDS[5],
    // The `bpf` filter and action kinds are looked up by exact name.
    kw("bpf", 3, NO_BPF),
];

const BRIDGE_WORDS: &[Keyword] = &[
    // bridge/monitor.c `file`: matches.
    kw("file", 2, Deny::File),
];

fn check_iproute_words(program: &str, args: &[String], words: &[Keyword]) -> Result<(), Refusal> {
    for k in words {
        if let Some(arg) =
            args.iter().find(|arg| arg.len() >= k.shortest && k.keyword.starts_with(arg.as_str()))
        {
            return Err(k.deny.refuse_as(program, arg, k.keyword));
        }
    }
    monitor_file(program, args)
}

/// `f` is `file` in `ip monitor`, `ip xfrm monitor`, `tc monitor` and `bridge monitor`, where
/// `file` is the first keyword tested: refused after any word that may select `monitor`.
fn monitor_file(program: &str, args: &[String]) -> Result<(), Refusal> {
    let mut monitor = false;
    for arg in args {
        if monitor && arg == "f" {
            return Err(Deny::File.refuse_as(program, arg, "file"));
        }
        monitor |= !arg.is_empty() && "monitor".starts_with(arg.as_str());
    }
    Ok(())
}

fn check_ip(args: &[String]) -> Result<(), Refusal> {
    check_iproute_options("ip", args, IP_OPTIONS)?;
    check_iproute_words("ip", args, IP_WORDS)?;
    // Any other spelling that carries a namespace name or id (`netnsid`, a future keyword).
    if let Some(arg) = args.iter().find(|a| a.contains("netns") || a.contains("nsid")) {
        return Err(Deny::Namespace.refuse("ip", arg));
    }
    // `ip vrf exec` runs a program; `v` and `vr` select the same object.
    if let Some((_, object)) = ip_object(args)
        && "vrf".starts_with(object)
    {
        return Err(Deny::Program.refuse_as("ip", object, "vrf"));
    }
    Ok(())
}

/// The object word of an `ip` command line and its index in `args`, skipping global options
/// and their values the way ip does (`-l N`, `-f FAMILY`, `-rc N` take one).
fn ip_object(args: &[String]) -> Option<(usize, &str)> {
    iproute_object(args, |opt| {
        (opt.len() >= 2 && ("-loops".starts_with(opt) || "-family".starts_with(opt)))
            || (opt.len() >= 3 && "-rcvbuf".starts_with(opt))
    })
}

/// The first word after an iproute2 tool's global options, and its index; `takes_value` says
/// which options consume the next word (`-` or `--` form, written with one dash).
fn iproute_object(args: &[String], takes_value: impl Fn(&str) -> bool) -> Option<(usize, &str)> {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        if word == "--" {
            return args.get(i + 1).map(|w| (i + 1, w.as_str()));
        }
        let Some(rest) = word.strip_prefix('-') else {
            return Some((i, word));
        };
        let opt = if rest.starts_with('-') { rest } else { word.as_str() };
        i += if takes_value(opt) { 2 } else { 1 };
    }
    None
}

fn check_tc(args: &[String]) -> Result<(), Refusal> {
    check_iproute_options("tc", args, TC_OPTIONS)?;
    check_iproute_words("tc", args, TC_WORDS)
}

fn check_bridge(args: &[String]) -> Result<(), Refusal> {
    check_iproute_options("bridge", args, BRIDGE_OPTIONS)?;
    check_iproute_words("bridge", args, BRIDGE_WORDS)
}

/// Checks getopt-style options: clustered short options (`-wp` is `-w -p`) and long options
/// with any unambiguous abbreviation (`--fi` is `--file`). Every letter of a cluster is checked,
/// even after one that takes a value: that can refuse a harmless `-tfilter`, never miss a
/// refused option.
fn check_getopt(
    program: &str,
    args: &[String],
    short: &[(char, Deny)],
    long: &[(&str, Deny)],
) -> Result<(), Refusal> {
    for arg in args {
        if let Some(rest) = arg.strip_prefix("--") {
            let name = rest.split_once('=').map_or(rest, |(name, _)| name);
            if name.is_empty() {
                continue;
            }
            if let Some(&(_, deny)) = long.iter().find(|(denied, _)| denied.starts_with(name)) {
                return Err(deny.refuse(program, arg));
            }
        } else if let Some(cluster) = arg.strip_prefix('-')
            && let Some(&(_, deny)) = short.iter().find(|(letter, _)| cluster.contains(*letter))
        {
            return Err(deny.refuse(program, arg));
        }
    }
    Ok(())
}

/// Like [`check_getopt`], then every option must also be on an allow-list: for tools whose
/// full option set is small and whose unknown options are better refused than guessed at.
fn check_getopt_allowed(
    program: &str,
    args: &[String],
    allowed_short: &str,
    allowed_long: &[&str],
    why: &'static str,
) -> Result<(), Refusal> {
    for arg in args {
        let ok = if let Some(rest) = arg.strip_prefix("--") {
            let name = rest.split_once('=').map_or(rest, |(name, _)| name);
            name.is_empty() || allowed_long.iter().any(|a| a.starts_with(name))
        } else if let Some(cluster) = arg.strip_prefix('-') {
            cluster.chars().all(|c| allowed_short.contains(c))
        } else {
            true
        };
        if !ok {
            return Err(Deny::Other(why).refuse(program, arg));
        }
    }
    Ok(())
}

fn check_nft(args: &[String]) -> Result<(), Refusal> {
    check_getopt(
        "nft",
        args,
        &[('f', Deny::File), ('I', Deny::File), ('i', Deny::Other("interactive mode is not available"))],
        &[
            ("file", Deny::File),
            ("includepath", Deny::File),
            ("interactive", Deny::Other("interactive mode is not available")),
        ],
    )?;
    check_getopt_allowed(
        "nft",
        args,
        "hvVcoastSNunypTej",
        &[
            "help",
            "version",
            "check",
            "optimize",
            "handle",
            "stateless",
            "terse",
            "service",
            "reversedns",
            "guid",
            "numeric",
            "numeric-priority",
            "numeric-protocol",
            "numeric-time",
            "echo",
            "json",
        ],
        "allowed options: -a -c -e -j -n -N -o -p -s -S -t -T -u -y -v -V -h and their long forms",
    )?;
    // nft joins its arguments into one script, and `include "NAME"` in it reads NAME from the
    // include path (`/etc`): `include "shadow"` would print the file back in the parse errors.
    if let Some(arg) = args.iter().find(|a| a.to_ascii_lowercase().contains("include")) {
        return Err(Deny::File.refuse("nft", arg));
    }
    Ok(())
}

fn check_sysctl(args: &[String]) -> Result<(), Refusal> {
    check_getopt(
        "sysctl",
        args,
        &[('p', Deny::File), ('f', Deny::File)],
        &[("load", Deny::File), ("system", Deny::File)],
    )?;
    check_getopt_allowed(
        "sysctl",
        args,
        "aAXbeNnqwhdVox",
        &["all", "binary", "ignore", "names", "values", "quiet", "write", "help", "version"],
        "allowed options: -a -A -X -b -e -n -N -q -w and their long forms",
    )?;
    for arg in args.iter().filter(|a| !a.starts_with('-')) {
        // Every word with `=` is a write, with or without -w. Only net.* is per namespace:
        // kernel.*, vm.*, fs.* are the host's. Reads are held to the same rule so the
        // agent meets one simple rule rather than two.
        let key = arg.split_once('=').map_or(arg.as_str(), |(key, _)| key).trim_ascii();
        let ok = key.len() > "net.".len()
            && key.starts_with("net.")
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !ok {
            return Err(Refusal::SysctlKey { key: shown(key) });
        }
    }
    Ok(())
}

/// A sysctl write (`KEY=VALUE`, with or without `-w`) must name a key the kernel keeps per
/// network namespace ([`crate::sysctl`]): `net.netfilter.nf_hooks_lwtunnel` is under `net.` but
/// is one value for the whole machine. `writable` answers for a key, or says why it cannot.
fn check_sysctl_writes(
    command: &Command,
    writable: impl Fn(&str) -> Result<bool, String>,
) -> Result<(), Refusal> {
    if command.program.file_name().is_none_or(|n| n != "sysctl") {
        return Ok(());
    }
    for arg in command.args.iter().filter(|a| !a.starts_with('-')) {
        let Some((key, _)) = arg.split_once('=') else { continue };
        let key = key.trim_ascii();
        match writable(key) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Refusal::SysctlHostWide {
                    key: shown(key),
                    why: "the kernel keeps one value for the whole machine, or no namespace's own \
                          value could be shown to exist"
                        .into(),
                });
            }
            Err(e) => return Err(Refusal::SysctlHostWide { key: shown(key), why: e }),
        }
    }
    Ok(())
}

/// ethtool matches its options exactly, so exact words suffice.
fn check_ethtool(args: &[String]) -> Result<(), Refusal> {
    for arg in args {
        let deny = match arg.as_str() {
            "-f" | "--flash" | "-w" | "--get-dump" | "file" | "data" => Deny::File,
            "-E" | "--change-eeprom" => Deny::Other("it rewrites the device EEPROM"),
            "-W" | "--set-dump" => Deny::Other("device dump settings are not available"),
            "--reset" => Deny::Other("it resets device hardware"),
            _ => continue,
        };
        return Err(deny.refuse("ethtool", arg));
    }
    Ok(())
}

/// The first executable `name` in [`BIN_DIRS`]. The path is kept as found, not canonicalized:
/// multi-call binaries (`iptables` -> `xtables-nft-multi`) dispatch on the name they run as.
pub(crate) fn resolve(name: &str) -> Option<PathBuf> {
    BIN_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Checks that `ns_name` is a network namespace mounted by `ip netns` and not the one this
/// process (or the machine's init) lives in: a namespace file bind-mounted from the host's
/// would otherwise turn every contained command into a host command.
fn check_namespace(ns_name: &str) -> Result<(), ExecError> {
    let valid = !ns_name.is_empty()
        && ns_name.len() <= 255
        && !ns_name.starts_with(['.', '-'])
        && ns_name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !valid {
        return Err(ExecError::BadNamespaceName(ns_name.to_string()));
    }
    let name = ns_name.to_string();
    let target = fs::metadata(Path::new(crate::netns::NETNS_DIR).join(ns_name))
        .map_err(|source| ExecError::Namespace { name: name.clone(), source })?;
    let ours = fs::metadata("/proc/thread-self/ns/net")
        .map_err(|source| ExecError::Namespace { name: name.clone(), source })?;
    // Every namespace lives on the nsfs device: anything else is a plain file left behind.
    if target.dev() != ours.dev() {
        return Err(ExecError::NotANamespace { name });
    }
    let same = |m: &fs::Metadata| m.dev() == target.dev() && m.ino() == target.ino();
    // /proc/1 may be unreadable without privileges; ip netns exec would fail there anyway.
    let init_ns = fs::metadata("/proc/1/ns/net").ok();
    if same(&ours) || init_ns.as_ref().is_some_and(same) {
        return Err(ExecError::HostNamespace { name });
    }
    Ok(())
}

/// The first `cap` bytes of one stream, and how many bytes it carried in all.
#[derive(Debug)]
struct Capture {
    cap: usize,
    kept: Vec<u8>,
    seen: u64,
}

impl Capture {
    fn new(cap: usize) -> Self {
        Self { cap, kept: Vec::with_capacity(cap.min(8192)), seen: 0 }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.seen = self.seen.saturating_add(chunk.len() as u64);
        let room = self.cap.saturating_sub(self.kept.len()).min(chunk.len());
        self.kept.extend_from_slice(&chunk[..room]);
    }

    /// Reads to end of file in small chunks, so a command printing gigabytes costs at most
    /// `cap` bytes of memory.
    async fn pump(&mut self, mut reader: impl AsyncRead + Unpin) -> io::Result<()> {
        let mut buf = [0u8; 8192];
        loop {
            let n = reader.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            self.push(&buf[..n]);
        }
    }
}

/// Runs a command that passed [`parse`] inside the network namespace `ns_name`
/// (`/run/netns/NAME`), under `policy`. A command that fails, times out or prints too much is
/// still an `Ok`: that is the agent's observation. `Err` means the environment is broken.
///
/// The caller vouches for `command`: only values from [`parse`] should reach here.
pub async fn run(ns_name: &str, command: &Command, policy: &Policy) -> Result<Output, ExecError> {
    check_namespace(ns_name)?;
    let spec = agent_jail(ns_name, policy)?;
    let jail = netdojo_jail::binary().map_err(ExecError::NoJail)?;
    let mut cmd = tokio::process::Command::new(&jail);
    cmd.args(spec.args(&command.program, &command.args))
        .env_clear()
        .env("PATH", CHILD_PATH)
        .env("LC_ALL", "C")
        // A bare file name given to a tool then names something in `/`, not in our checkout.
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own group, so the time limit kills the jail and the program in it together.
        .process_group(0);
    let mut child = cmd.spawn().map_err(|source| ExecError::Spawn { program: jail.clone(), source })?;
    // The jail's PID and group; the program is in the same group (and dies with the jail).
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let stdout = child.stdout.take().ok_or(ExecError::NoPipe("stdout"))?;
    let stderr = child.stderr.take().ok_or(ExecError::NoPipe("stderr"))?;

    let mut out = Capture::new(policy.output_cap);
    let mut err = Capture::new(policy.output_cap);
    let finished = tokio::time::timeout(policy.timeout, async {
        tokio::join!(out.pump(stdout), err.pump(stderr), child.wait())
    })
    .await;

    let describe = || command.to_string();
    let (status, timed_out) = match finished {
        Ok((read_out, read_err, status)) => {
            read_out.map_err(|source| ExecError::Read { command: describe(), source })?;
            read_err.map_err(|source| ExecError::Read { command: describe(), source })?;
            let status = status.map_err(|source| ExecError::Wait { command: describe(), source })?;
            (status.code(), false)
        }
        Err(_elapsed) => {
            if let Some(pgid) = pgid {
                // The group outlives its leader only while a member is alive, so this cannot hit
                // a recycled group. ESRCH (all gone already) is fine.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let _ = child.start_kill();
            // Bounded: a child stuck in the kernel must not stall the episode; kill_on_drop and
            // tokio's orphan reaping take over if it outlasts this.
            let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
            // The program is the PID namespace's first process, a child of the jail rather than
            // of us: it may still be exiting when the jail has been reaped. Wait (bounded) until
            // no member of the group is alive, so that nothing of a command outlives `run`. (Its
            // zombie is the host init's to reap, which may take a second; a zombie runs nothing.)
            if let Some(pgid) = pgid {
                let deadline = tokio::time::Instant::now() + REAP_GRACE;
                while group_alive(pgid) && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            (None, true)
        }
    };
    if let Some(message) = netdojo_jail::setup_failure(status, &err.kept) {
        return Err(ExecError::Jail { command: describe(), message });
    }
    Ok(render(out, err, policy, status, timed_out))
}

/// Whether a process of group `pgid` is alive (a zombie is not): `/proc/PID/stat` holds
/// `PID (COMM) STATE PPID PGRP ...`.
fn group_alive(pgid: i32) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else { return false };
    let pgid = pgid.to_string();
    entries.flatten().any(|entry| {
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else { return false };
        let Some((_, rest)) = stat.rsplit_once(')') else { return false };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.first().is_some_and(|state| *state != "Z") && fields.get(2) == Some(&pgid.as_str())
    })
}

/// The jail of an agent's command in `ns_name`: the node's namespace, nothing of the host
/// writable, the host-wide `net.*` keys read-only, CPU time a second over the time limit.
fn agent_jail(ns_name: &str, policy: &Policy) -> Result<netdojo_jail::Spec, ExecError> {
    let mut spec =
        crate::sysctl::jail_spec(netdojo_jail::Profile::Agent, ns_name).map_err(ExecError::Sysctls)?;
    spec.cpu_seconds = policy.timeout.as_secs().saturating_add(1);
    Ok(spec)
}

fn render(out: Capture, err: Capture, policy: &Policy, status: Option<i32>, timed_out: bool) -> Output {
    let mut bytes = out.kept;
    let from_out = bytes.len();
    let from_err = err.kept.len().min(policy.output_cap.saturating_sub(from_out));
    if from_err > 0 && bytes.last().is_some_and(|&b| b != b'\n') {
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(&err.kept[..from_err]);
    let kept = (from_out + from_err) as u64;
    let omitted = out.seen.saturating_add(err.seen).saturating_sub(kept);

    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    let truncated = omitted > 0;
    if truncated {
        end_line(&mut text);
        text.push_str(&format!("[output truncated: {omitted} bytes omitted]\n"));
    }
    if timed_out {
        end_line(&mut text);
        text.push_str(&format!("[timed out after {}; the command was killed]\n", human(policy.timeout)));
    }
    Output { status, text, timed_out, truncated }
}

fn end_line(text: &mut String) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
}

/// `5 s`, `250 ms`, or Debug's form for anything finer.
fn human(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else if d.subsec_nanos().is_multiple_of(1_000_000) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{d:?}")
    }
}

/// Runs a trusted command of our own (fault injection / repair uses the same path): parse + run.
/// The outer `Err` is an environment failure, the inner one a refusal.
pub async fn run_line(
    ns_name: &str,
    line: &str,
    policy: &Policy,
) -> Result<Result<Output, Refusal>, ExecError> {
    match parse(line) {
        Ok(command) => run(ns_name, &command, policy).await.map(Ok),
        Err(refusal) => Ok(Err(refusal)),
    }
}

/// Whether a command that passed [`parse`] only reads the node's state: the show and list forms
/// of each allowed tool (`ip addr show`, `ip -j route get 10.0.0.1`, `tc qdisc show`, `nft list
/// ruleset`, `iptables -S`, `sysctl net.ipv4.ip_forward`, `ethtool eth0`, `arp -n` ...). `Err`
/// says why not, in one line. The list is an allow-list of forms, not a deny-list of verbs: a
/// form missing here is refused, never run. For front ends that promise a read-only command
/// (MCP's `network.cli.exec`); the agent's `exec` tool of the routing environment runs both.
pub fn read_only(command: &Command) -> Result<(), String> {
    let program = command.program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let args = command.args.as_slice();
    let words: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with('-')).collect();
    let dashes = || args.iter().map(String::as_str).filter(|a| a.starts_with('-'));
    let not = |why: &str| Err(format!("`{command}` is not a read-only command: {why}"));
    match program.as_str() {
        "ip" => {
            // Global options come first and only -f/-l/-rc take a value; the object follows.
            // The action is the word after the object where the object stands, not after the
            // first word equal to it: in `ip -l link -d link set ..` that is an option's value.
            let Some((at, object)) = ip_object(args) else { return Ok(()) };
            let action = args.get(at + 1).map(String::as_str);
            const OBJECTS: &[&str] = &[
                "a",
                "addr",
                "address",
                "l",
                "link",
                "r",
                "ro",
                "route",
                "n",
                "neigh",
                "neighbor",
                "neighbour",
                "ru",
                "rule",
                "maddr",
                "netconf",
                "ntable",
                "token",
            ];
            if !OBJECTS.contains(&object) {
                return not("`ip` reads addr, link, route, neigh, rule, maddr, netconf, ntable, token");
            }
            match action {
                None | Some("show" | "sh" | "list" | "lst" | "ls" | "get") => Ok(()),
                // `ip route dev X` and the like: a selector right after the object is a show.
                Some(a) if a.starts_with('-') => Ok(()),
                Some("dev" | "table" | "to" | "from" | "scope" | "proto" | "type" | "up" | "vrf") => Ok(()),
                Some(other) => not(&format!("`{other}` changes state (use show, list or get)")),
            }
        }
        "bridge" | "tc" => {
            let objects: &[&str] = if program == "tc" {
                &["qdisc", "class", "filter", "q", "c", "f"]
            } else {
                &["fdb", "link", "vlan", "mdb", "l", "v", "m"]
            };
            // Option values are skipped as the tools skip them (`bridge -f link fdb ..`: `link`
            // is the family's value), and the action is the word right after the object.
            let object = if program == "tc" {
                iproute_object(args, |_| false)
            } else {
                iproute_object(args, |opt| opt.len() >= 2 && "-family".starts_with(opt))
            };
            let Some((at, object)) = object else { return Ok(()) };
            match args.get(at + 1).map(String::as_str) {
                None | Some("show" | "list" | "ls" | "dev") if objects.contains(&object) => Ok(()),
                _ => not(&format!("`{program}` reads {} with show", objects.join(", "))),
            }
        }
        // nft joins its arguments into one script, where `;` and braces start another command
        // (`nft list ruleset ; flush ruleset`): one `list` command, nothing more.
        "nft" => match words.first() {
            _ if args.iter().any(|a| a.contains([';', '{', '}'])) => {
                not("`;` and braces start another nft command; send one `nft list ...`")
            }
            Some(&"list") => Ok(()),
            _ => not("`nft` reads with `nft list ...`"),
        },
        "iptables" | "ip6tables" => {
            // Every option must be a listing one; -t takes the table, any other word is a chain.
            let mut table_next = false;
            for arg in args {
                if table_next {
                    table_next = false;
                    continue;
                }
                let ok = match arg.as_str() {
                    "--list" | "--list-rules" | "--numeric" | "--verbose" | "--exact" | "--line-numbers" => {
                        true
                    }
                    "-t" | "--table" => {
                        table_next = true;
                        true
                    }
                    a if a.starts_with("--") => false,
                    a if a.starts_with('-') => a.len() > 1 && a[1..].chars().all(|c| "SLnvx".contains(c)),
                    _ => true,
                };
                if !ok {
                    return not("`iptables` reads with -S or -L (and -n, -v, -x, -t TABLE, --line-numbers)");
                }
            }
            if args.iter().any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(['S', 'L']))
                || args.iter().any(|a| a == "--list" || a == "--list-rules")
            {
                Ok(())
            } else {
                not("`iptables` reads with -S or -L")
            }
        }
        "iptables-save" | "ip6tables-save" | "ss" | "netstat" | "hostname" => {
            // getopt takes any unambiguous abbreviation: `--k` may be `--kill`.
            if program == "ss"
                && dashes().any(|a| a.starts_with("--k") || (!a.starts_with("--") && a.contains('K')))
            {
                return not("`ss -K` closes sockets");
            }
            Ok(())
        }
        "sysctl" => {
            if args.iter().any(|a| a.contains('='))
                || dashes().any(|a| a.starts_with("--w") || (!a.starts_with("--") && a.contains('w')))
            {
                return not("`sysctl` reads a key; KEY=VALUE and -w write");
            }
            Ok(())
        }
        "ethtool" => {
            const READS: &[&str] = &[
                "-i",
                "--driver",
                "-S",
                "--statistics",
                "-k",
                "--show-features",
                "--show-offload",
                "-g",
                "--show-ring",
                "-a",
                "--show-pause",
                "-c",
                "--show-coalesce",
                "-l",
                "--show-channels",
                "-T",
                "--show-time-stamping",
                "-P",
                "--show-permaddr",
                "--show-eee",
                "--show-fec",
            ];
            match (args.len(), args.first().map(String::as_str)) {
                (1, Some(iface)) if !iface.starts_with('-') => Ok(()),
                (2, Some(opt)) if READS.contains(&opt) && !args[1].starts_with('-') => Ok(()),
                _ => not("`ethtool` reads with `ethtool IFACE` or a show option (-i, -S, -k, -g, ...)"),
            }
        }
        "arp" => {
            let ok = dashes().all(|a| !a.starts_with("--") && a[1..].chars().all(|c| "naevi".contains(c)));
            if ok { Ok(()) } else { not("`arp` reads with -n, -a, -e, -v, -i IFACE") }
        }
        "route" => {
            let ok = words.is_empty()
                && dashes().all(|a| !a.starts_with("--") && a[1..].chars().all(|c| "nevFC".contains(c)));
            if ok { Ok(()) } else { not("`route` reads with -n, -e, -v (add/del change state)") }
        }
        "ifconfig" => {
            let ok = words.len() <= 1 && dashes().all(|a| matches!(a, "-a" | "-s" | "-v"));
            if ok { Ok(()) } else { not("`ifconfig` reads with no argument, -a, -s or one interface name") }
        }
        other => not(&format!("`{other}` has no read-only form here")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(name: &str) -> Option<PathBuf> {
        Some(PathBuf::from(format!("/usr/sbin/{name}")))
    }

    fn ok(line: &str) -> Command {
        match parse_with(line, fake) {
            Ok(c) => c,
            Err(r) => panic!("{line:?} refused: {r}"),
        }
    }

    fn no(line: &str) -> Refusal {
        match parse_with(line, fake) {
            Ok(c) => panic!("{line:?} accepted as {c:?}"),
            Err(r) => {
                let text = r.to_string();
                assert!(!text.contains('\n') && text.starts_with("refused: "), "{text:?}");
                r
            }
        }
    }

    #[test]
    fn netpress_commands_are_accepted() {
        for line in [
            "ip route",
            "ip -o -4 addr show",
            "ip -s -d link show r0-eth1",
            "ip route add 10.0.2.0/24 via 10.0.1.2 dev r0-eth1",
            "ip route del default",
            "ip -6 route add fe80::/64 dev r0-eth1",
            "ip addr add 192.168.1.1/32 dev r0-eth2",
            "ip -br a",
            "ip -f inet route",
            "ip neigh flush all",
            "ip netconf",
            "ip link set dev r0-eth1 vrf blue",
            "ip monitor",
            "iptables -L -n -v",
            "iptables -A FORWARD -s 10.0.0.0/24,10.0.1.0/24 -j DROP",
            "iptables -A INPUT -s 192.168.1.0/255.255.255.0 -j ACCEPT",
            "iptables -A INPUT -p icmp -m limit --limit 5/min -j ACCEPT",
            "iptables -A INPUT ! -i lo -m statistic --mode random --probability 0.5 -j DROP",
            "iptables -t nat -nvL",
            "iptables-save",
            "iptables-save -t filter -c",
            "ip6tables -L",
            "ifconfig r0-eth1 up",
            "ifconfig r0-eth1 10.0.1.1 netmask 255.255.255.0",
            "sysctl -w net.ipv4.ip_forward=1",
            "sysctl net.ipv4.conf.all.forwarding=1",
            "sysctl -n net.ipv4.ip_forward",
            "sysctl -a",
            "sysctl --write net.ipv6.conf.all.forwarding=1",
            "tc qdisc del dev r0-eth2 root",
            "tc -s qdisc show dev r0-eth2",
            "tc qdisc add dev r0-eth1 root netem delay 100ms loss 10%",
            "nft list ruleset",
            "nft -a list ruleset",
            "nft add rule ip filter input ip saddr 10.0.0.0/8 limit rate 10/second accept",
            "arp -n",
            "arp -d 10.0.1.2",
            "ethtool r0-eth1",
            "ethtool -s r0-eth1 speed 100 duplex full autoneg off",
            "ethtool -S r0-eth1",
            "route -n",
            "route add -net 10.0.3.0/24 gw 10.0.1.2",
            "bridge link",
            "ss -tulpn",
            "ss --numeric -a",
            "netstat -rn",
            "hostname",
        ] {
            let c = ok(line);
            assert!(c.program.is_absolute(), "{line}");
        }
    }

    #[test]
    fn quoting_and_whitespace() {
        let c = ok("iptables -A INPUT -m comment --comment \"allow ssh\" -j ACCEPT");
        assert_eq!(c.program, PathBuf::from("/usr/sbin/iptables"));
        assert_eq!(c.args, ["-A", "INPUT", "-m", "comment", "--comment", "allow ssh", "-j", "ACCEPT"]);
        assert_eq!(ok("  ip\troute  \n").args, ["route"]);
        assert_eq!(ok("ip 'route' \"show\"").args, ["route", "show"]);
        assert_eq!(ok("sysctl -w 'net.ipv4.tcp_rmem=4096 87380 6291456'").args.len(), 2);
        // Escaped `#` is a character, not a comment.
        assert_eq!(ok("ip link set r0-eth1 alias \\#1").args.last().map(String::as_str), Some("#1"));
        assert_eq!(no("ip route 'show"), Refusal::UnbalancedQuote);
        assert_eq!(no("ip route \"show"), Refusal::UnbalancedQuote);
        assert_eq!(no("ip route \\"), Refusal::UnbalancedQuote);
        assert!(matches!(no("ip route # show"), Refusal::ShellMeta { ch: '#', .. }));
        // Quoting does not launder shell syntax.
        assert!(matches!(no("ip 'a;b'"), Refusal::ShellMeta { ch: ';', .. }));
        assert_eq!(ok("ip link").to_string(), "ip link", "Display gives the bare name and the arguments");
        assert_eq!(ok("iptables --comment 'a b'").to_string(), "iptables --comment 'a b'");
    }

    #[test]
    fn line_level_refusals() {
        assert_eq!(no(""), Refusal::Empty);
        assert_eq!(no("   \n"), Refusal::Empty);
        assert_eq!(no("''"), Refusal::NotAllowed { program: String::new() });
        let long = format!("ip {}", "a".repeat(MAX_LINE));
        assert_eq!(no(&long), Refusal::TooLong { len: MAX_LINE + 3 });
        let max = format!("ip route{}", " ".repeat(MAX_LINE - 8));
        assert_eq!(ok(&max).args, ["route"]);
        assert_eq!(no("ip\0route"), Refusal::NulByte);
        assert_eq!(no("ip route\nreboot"), Refusal::LineBreak);
        assert_eq!(no("ip route\rreboot"), Refusal::LineBreak);
        assert_eq!(no("ip route\x1b[2J"), Refusal::ControlChar { code: 0x1b });
        assert_eq!(no("ip route\x7f"), Refusal::ControlChar { code: 0x7f });
        assert_eq!(no("\u{456}p link"), Refusal::NonAscii { code: 0x456 });
        assert_eq!(no("ip\u{a0}link"), Refusal::NonAscii { code: 0xa0 });
        assert_eq!(no("ip addr\u{ff1b}reboot"), Refusal::NonAscii { code: 0xff1b });
        assert_eq!(no("ip \u{202e}knil"), Refusal::NonAscii { code: 0x202e });
    }

    #[test]
    fn shell_syntax_is_refused() {
        for (line, ch) in [
            ("ip addr; rm -rf /", ';'),
            ("ip a | sh", '|'),
            ("ip a && reboot", '&'),
            ("ip a & ", '&'),
            ("ip $(reboot)", '$'),
            ("ip `reboot`", '`'),
            ("ip a > /etc/hosts", '>'),
            ("ip -batch < /etc/passwd", '<'),
            ("ip link show r*", '*'),
            ("ip link show r?-eth1", '?'),
            ("ip link show ~root", '~'),
            ("ip route show table {main}", '{'),
            ("ip route show table main}", '}'),
        ] {
            match no(line) {
                Refusal::ShellMeta { ch: got, .. } => assert_eq!(got, ch, "{line}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        let msg = no("ip a | sh").to_string();
        assert!(msg.contains("no shell") && msg.contains("one command runs per step"), "{msg}");
        // nftables syntax is nft's own: its braces and `;` reach it as arguments.
        assert_eq!(
            ok("nft add chain inet filter forward { type filter hook forward priority 0 ; policy drop ; }")
                .args()[5..8],
            ["{", "type", "filter"]
        );
        assert_eq!(
            no("nft list ruleset | sh").to_string(),
            no("ip a | sh").to_string().replace("ip a", "nft list ruleset")
        );
        // A tilde inside a word is not expansion.
        ok("ip link set r0-eth1 alias a~b");
    }

    #[test]
    fn programs() {
        assert_eq!(no("/bin/sh"), Refusal::ProgramPath { token: "/bin/sh".into() });
        assert_eq!(no("../../bin/sh"), Refusal::ProgramPath { token: "../../bin/sh".into() });
        assert_eq!(no("/usr/sbin/ip route"), Refusal::ProgramPath { token: "/usr/sbin/ip".into() });
        for p in ["sh", "bash", "sudo", "nsenter", "unshare", "cat", "python3", "ipp", "IP"] {
            assert_eq!(no(p), Refusal::NotAllowed { program: p.into() });
        }
        assert!(no("cat x").to_string().contains("allowed: ip, ifconfig"));
        for p in ["ping 8.8.8.8", "ping6 ::1", "traceroute 10.0.0.1", "mtr x"] {
            let r = no(p);
            assert!(matches!(r, Refusal::PingUnavailable { .. }), "{p}");
            assert!(r.to_string().contains("pingmesh is provided after every step"));
        }
        assert_eq!(no("vtysh -c 'show ip route'"), Refusal::NotPermitted { program: "vtysh".into() });
        assert_eq!(
            parse_with("nft list ruleset", |_| None),
            Err(Refusal::NotInstalled { program: "nft".into() })
        );
        // Hostile arguments are refused for what they are even where the tool is missing.
        assert!(matches!(parse_with("nft -f x", |_| None), Err(Refusal::FileAccess { .. })));
    }

    #[test]
    fn paths() {
        for line in [
            "ip -batch /etc/passwd",
            "arp -n /etc/ethers",
            "ip route show table ../x",
            "ip route add 10.0.0.0/24/",
            "ip route add 10.0.0.0/33",
            "ip route add fe80::/129",
            "ip r a 10.0.0.0/+8",
            "iptables --limit etc/min",
            "ip a add 10.0.0.1/24,/etc",
        ] {
            assert!(matches!(no(line), Refusal::PathArgument { .. }), "{line}");
        }
        ok("ip route add ::/0 dev lo");
        ok("iptables -A INPUT -m hashlimit --hashlimit-upto 50/sec --hashlimit-name x -j ACCEPT");
        ok("nft add rule ip f i limit rate over 10 mbytes/second drop");
    }

    #[test]
    fn iproute2_namespace_escapes() {
        for line in [
            "ip netns exec x sh",
            "ip netns list",
            "ip net exec x sh",
            "ip netn add x",
            "ip -n foo link",
            "ip -ne foo link",
            "ip -netns foo link",
            "ip --netns foo link",
            "ip --n foo link",
            "ip -all netns exec ip link",
            "ip -a link",
            "ip link set r0-eth1 netns 1",
            "ip link add v0 type veth peer name v1 netns 1",
            "ip link set dev r0-eth1 link-netnsid 0",
            "ip monitor all-nsid",
            "tc -n foo qdisc show",
            "tc -netns foo qdisc show",
            "tc --net foo qdisc show",
            "bridge -n foo link",
            "bridge -netns foo fdb",
            "ss -N foo -t",
            "ss -tN foo",
            "ss --net foo",
            "ss --ne=foo",
        ] {
            assert!(
                matches!(no(line), Refusal::NamespaceEscape { .. }),
                "{line}: {:?}",
                parse_with(line, fake)
            );
        }
        ok("ip -N route");
        ok("ip -br link");
        ok("tc -names qdisc");
    }

    /// Every spelling iproute2 6.1 reads as a refused keyword (`matches()`: any prefix from the
    /// shortest unambiguous one), with the keyword named in the message.
    #[test]
    fn iproute2_keyword_prefixes() {
        for (line, means) in [
            ("ip link add evil0 link-net ndj1x0-r0 type veth peer name stolen0", "link-netns"),
            ("ip link add evil0 link- x type veth peer name y", "link-netns"),
            ("ip link add evil0 link-n x type veth peer name y", "link-netns"),
            ("ip link add evil0 link-netnsi 0 type veth peer name y", "link-netnsid"),
            ("ip monitor all-n", "all-nsid"),
            ("ip monitor all-", "all-nsid"),
            ("ip xfrm monitor all-ns", "all-nsid"),
            ("ip net list", "netns"),
            ("ip netns", "netns"),
            ("ip -ne foo link", "-netns"),
            ("ip -al netns list", "-all"),
        ] {
            match no(line) {
                Refusal::NamespaceEscape { means: got, .. } => assert_eq!(got, means, "{line}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        for line in ["ip monitor nsid", "ip netns list-id target-nsid 1", "ip link set dev x netnsid 1"] {
            assert!(matches!(no(line), Refusal::NamespaceEscape { .. }), "{line}");
        }
        for (line, means) in [
            ("ip monitor f x", "file"),
            ("ip monitor fi x", "file"),
            ("ip mo fil x", "file"),
            ("ip -t monitor f x", "file"),
            ("ip xfrm monitor f x", "file"),
            ("ip link set dev r0-eth1 xdp obje x", "object-file"),
            ("ip link set dev r0-eth1 xdp object x", "object-file"),
            ("ip link set dev r0-eth1 xdpgeneric pinned x", "pinned"),
            ("ip link set dev r0-eth1 xdp pin x", "pinned"),
            ("ip link set dev r0-eth1 xdp object-p x", "object-pinned"),
            ("ip route add 10.0.0.0/24 encap bpf in obj x dev r0-eth1", "object-file"),
            ("tc filter add dev r0-eth1 ingress bpf bcf x", "bcf"),
            ("tc filter add dev r0-eth1 ingress bpf bytecode-f x", "bytecode-file"),
            ("tc filter add dev r0-eth1 ingress bpf da obj x sec s export sock", "object-file"),
            ("tc filter add dev r0-eth1 ingress bpf exp sock", "export"),
            ("tc action add action bpf object-pinned x", "object-pinned"),
            ("tc monitor f x", "file"),
            ("tc m fi x", "file"),
            ("bridge monitor file x", "file"),
            ("bridge monitor fil x", "file"),
            ("bridge mo f x", "file"),
        ] {
            match no(line) {
                Refusal::FileAccess { means: got, .. } => assert_eq!(got, means, "{line}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        for line in [
            "ip link set dev r0-eth1 xdp off",
            "ip link set dev r0-eth1 xdpdrv off",
            "ip route add 10.0.0.0/24 encap bpf headroom 1 dev r0-eth1",
            "tc filter add dev r0-eth1 ingress bpf bc 1,6_0_0_0",
            "tc action add action bpf bc 1,6_0_0_0",
        ] {
            assert!(
                matches!(no(line), Refusal::OptionNotPermitted { .. }),
                "{line}: {:?}",
                parse_with(line, fake)
            );
        }
        assert!(matches!(no("iptables -m bpf --object-pinned x -j DROP"), Refusal::FileAccess { .. }));
        assert!(matches!(no("iptables -m bpf --object x -j DROP"), Refusal::FileAccess { .. }));
        let msg = no("ip link add evil0 link-net x type veth peer name y").to_string();
        assert!(msg.contains("`link-net` (ip reads it as `link-netns`)"), "{msg}");
        assert!(no("ip monitor f x").to_string().contains("`f` (ip reads it as `file`)"));
        assert!(!no("ip monitor file x").to_string().contains("reads it as"));
        // Words an agent needs that share a first letter or a prefix with a refused keyword.
        for line in [
            "ip link set dev r0-eth1 down",
            "ip link add link r0-eth1 name r0-eth1.10 type vlan id 10",
            "ip link add name br0 type bridge",
            "ip link set r0-eth1 master br0",
            "ip addr add 10.0.0.1/24 dev r0-eth1",
            "ip route add 10.0.2.0/24 via 10.0.1.2",
            "ip route add 10.0.2.0/24 nexthop via 10.0.1.2 weight 1",
            "ip -j -d link",
            "ip -d link show",
            "ip f",
            "ip monitor all",
            "ip monitor link",
            "ip a",
            "ip n",
            "ip ne show",
            "ip route flush table main",
            "ip -f inet addr",
            "ip rule add fwmark 1 table 100",
            "tc qdisc add dev r0-eth1 root tbf rate 1mbit burst 32kbit latency 400ms",
            "tc f show dev r0-eth1",
            "tc filter add dev r0-eth1 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.0/24 flowid 1:1",
            "tc qdisc add dev r0-eth1 root handle 1: prio",
            "bridge f show",
            "bridge fdb show",
            "bridge monitor",
        ] {
            ok(line);
        }
    }

    #[test]
    fn programs_run_by_tools() {
        for line in [
            "ip vrf exec blue sh",
            "ip vrf e blue sh",
            "ip v show",
            "ip -4 vr show",
            "ip -f inet vrf show",
            "ip -l 3 -- vrf show",
            "tc exec bpf import x run sh",
            "tc e bpf",
            "iptables --modprobe=sh -L",
            "iptables --mod sh -L",
            "iptables-save -M sh",
            "ip6tables-save --modprobe sh",
        ] {
            assert!(matches!(no(line), Refusal::RunsProgram { .. }), "{line}: {:?}", parse_with(line, fake));
        }
    }

    #[test]
    fn files() {
        for line in [
            "ip -batch x",
            "ip -b x",
            "ip --batch x",
            "ip monitor file x",
            "ip link set dev r0-eth1 xdp obj prog.o",
            "tc -b x",
            "tc -c x qdisc",
            "tc -cf x qdisc",
            "tc filter add dev r0-eth1 ingress bpf obj prog.o",
            "bridge -batch x",
            "nft -f nftables.conf",
            "nft --file nftables.conf",
            "nft --fi x",
            "nft -cf x",
            "nft -I etc list ruleset",
            "nft include '\"shadow\"'",
            "nft INCLUDE x",
            "arp -f ethers",
            "arp -nf",
            "arp --file ethers",
            "iptables-save -f x",
            "iptables-save --fi x",
            "iptables-save -cf x",
            "ip6tables-save --file=x",
            "sysctl -p",
            "sysctl -wp",
            "sysctl -f x",
            "sysctl --load x",
            "sysctl --system",
            "sysctl --sys",
            "ss -F x",
            "ss -D x",
            "ss --diag=x",
            "ss --filter x",
            "ethtool -f r0-eth1 fw.bin",
            "ethtool --flash r0-eth1 fw.bin",
            "ethtool -w r0-eth1 data dump.bin",
            "ethtool -d r0-eth1 file regs.bin",
        ] {
            assert!(matches!(no(line), Refusal::FileAccess { .. }), "{line}: {:?}", parse_with(line, fake));
        }
    }

    #[test]
    fn host_wide_state() {
        for (line, key) in [
            ("sysctl -w kernel.hostname=pwned", "kernel.hostname"),
            ("sysctl -w vm.drop_caches=3", "vm.drop_caches"),
            ("sysctl kernel.core_pattern=x", "kernel.core_pattern"),
            ("sysctl fs.file-max", "fs.file-max"),
            ("sysctl -w net.=1", "net."),
            ("sysctl -w net", "net"),
            ("sysctl -w network.x=1", "network.x"),
            ("sysctl -w 1", "1"),
            ("sysctl -a kernel.x", "kernel.x"),
            ("sysctl -- kernel.x=1", "kernel.x"),
            ("sysctl -w net.ipv4.ip_forward:x=1", "net.ipv4.ip_forward:x"),
        ] {
            assert_eq!(no(line), Refusal::SysctlKey { key: key.into() }, "{line}");
        }
        for line in ["sysctl -r ip_forward", "sysctl -D x", "sysctl --pattern x"] {
            assert!(matches!(no(line), Refusal::OptionNotPermitted { .. }), "{line}");
        }
        for line in [
            "hostname pwned",
            "hostname -F x",
            "hostname -b x",
            "ethtool -E r0-eth1 magic 0 offset 0 value 1",
            "ethtool --change-eeprom r0-eth1",
            "ethtool -W r0-eth1 1",
            "ethtool --reset r0-eth1 all",
            "ip -force link",
            "ip -fo link",
            "tc -force qdisc",
            "nft -i",
            "nft --interactive",
            "nft -D x=1 list ruleset",
            "nft -d all list ruleset",
        ] {
            assert!(
                matches!(no(line), Refusal::OptionNotPermitted { .. }),
                "{line}: {:?}",
                parse_with(line, fake)
            );
        }
    }

    #[test]
    fn messages_name_the_token() {
        assert!(no("ip -n foo link").to_string().contains("`-n`"));
        assert!(no("sysctl -w kernel.hostname=x").to_string().contains("`kernel.hostname`"));
    }

    #[test]
    fn sysctl_writes_need_a_key_of_the_namespace() {
        let per_namespace = |key: &str| Ok(key != "net.netfilter.nf_hooks_lwtunnel");
        let check = |line: &str| check_sysctl_writes(&ok(line), per_namespace);
        assert_eq!(check("sysctl -w net.ipv4.ip_forward=1"), Ok(()));
        assert_eq!(check("sysctl net.netfilter.nf_hooks_lwtunnel"), Ok(()), "a read");
        for line in [
            "sysctl -w net.netfilter.nf_hooks_lwtunnel=1",
            "sysctl net.netfilter.nf_hooks_lwtunnel=1",
            "sysctl -w net.ipv4.ip_forward=1 net.netfilter.nf_hooks_lwtunnel=1",
        ] {
            let refusal = check(line).expect_err(line);
            assert!(
                matches!(&refusal, Refusal::SysctlHostWide { key, .. } if key == "net.netfilter.nf_hooks_lwtunnel")
            );
            assert!(
                refusal.to_string().starts_with(
                    "refused: sysctl key `net.netfilter.nf_hooks_lwtunnel` is not this node's own"
                )
            );
        }
        let unknown = check_sysctl_writes(&ok("sysctl -w net.ipv4.ip_forward=1"), |_| Err("no probe".into()));
        assert!(matches!(unknown, Err(Refusal::SysctlHostWide { .. })));
        assert!(no("ip addr;reboot").to_string().contains("`addr;reboot`"));
        let long = format!("ip link show {};", "x".repeat(200));
        let msg = no(&long).to_string();
        assert!(msg.len() < 300 && msg.contains("..."), "{msg}");
    }

    #[test]
    fn rendering() {
        let policy = Policy { timeout: Duration::from_millis(250), output_cap: 10 };
        let mut out = Capture::new(10);
        out.push(b"0123456");
        let mut err = Capture::new(10);
        err.push(b"abcdefghijkl");
        let o = render(out, err, &policy, None, true);
        assert_eq!(
            o.text,
            "0123456\nabc\n[output truncated: 9 bytes omitted]\n[timed out after 250 ms; the command was killed]\n"
        );
        assert!(o.truncated && o.timed_out);

        let mut out = Capture::new(10);
        out.push(b"ok\n");
        let o = render(out, Capture::new(10), &Policy::default(), Some(0), false);
        assert_eq!(o, Output { status: Some(0), text: "ok\n".into(), timed_out: false, truncated: false });
        assert_eq!(human(Duration::from_secs(5)), "5 s");
        assert_eq!(human(Duration::from_nanos(1)), "1ns");
    }
    #[test]
    fn read_only_forms_are_told_from_changes() {
        for line in [
            "ip route",
            "ip -j addr show",
            "ip -br a",
            "ip -4 route show table all",
            "ip route get 10.0.1.2",
            "ip rule list",
            "ip neigh show dev r0-eth1",
            "ip -s link show r0-eth1",
            "ip route dev r0-eth1",
            "bridge fdb show",
            "bridge -f inet fdb show",
            "ip -l 2 link show",
            "tc qdisc show",
            "tc -s qdisc show dev r0-eth1",
            "tc filter show dev r0-eth1",
            "nft list ruleset",
            "nft -a list table inet filter",
            "iptables -S",
            "iptables -nvL",
            "iptables -t nat -L -n --line-numbers",
            "iptables -L FORWARD",
            "iptables-save",
            "sysctl net.ipv4.ip_forward",
            "sysctl -n net.ipv4.conf.all.forwarding",
            "ethtool r0-eth1",
            "ethtool -S r0-eth1",
            "arp -n",
            "arp -an",
            "route -n",
            "ifconfig",
            "ifconfig r0-eth1",
            "ss -tan",
            "netstat -rn",
            "hostname",
        ] {
            assert_eq!(read_only(&ok(line)), Ok(()), "{line}");
        }
        for line in [
            "ip route add 10.0.2.0/24 via 10.0.1.2",
            "ip route del default",
            "ip r a 10.0.2.0/24 dev r0-eth1",
            "ip addr flush dev r0-eth1",
            "ip link set r0-eth1 down",
            "ip neigh flush all",
            "ip rule add from all lookup 100",
            "ip route replace 10.0.0.0/24 dev r0-eth1",
            "ip route save",
            "ip monitor",
            "tc qdisc add dev r0-eth1 root netem loss 100%",
            "tc qdisc del dev r0-eth1 root",
            "nft flush ruleset",
            "nft add table inet t",
            "iptables -F",
            "iptables -A FORWARD -j DROP",
            "iptables -LZ",
            "iptables -P FORWARD DROP",
            "sysctl -w net.ipv4.ip_forward=1",
            "sysctl net.ipv4.ip_forward=0",
            "ethtool -s r0-eth1 speed 10",
            "ethtool -K r0-eth1 tso off",
            "arp -s 10.0.0.2 00:11:22:33:44:55",
            "arp -d 10.0.0.2",
            "route add default gw 10.0.0.1",
            "route del -net 10.0.0.0 netmask 255.0.0.0",
            "ifconfig r0-eth1 down",
            "ifconfig r0-eth1 10.0.0.9",
            "ss -K dst 10.0.0.2",
            "ss --ki dst 10.0.0.2",
            "nft list ruleset ; flush ruleset",
            "nft 'list ruleset; flush ruleset'",
            "nft list table inet t { }",
            "bridge fdb add 00:11:22:33:44:55 dev s1-eth1",
            // The action after the object where it stands, not after an option's value.
            "ip -l link -d link set dev r0-eth1 down",
            "ip -f link link set dev r0-eth1 down",
            "ip -rc route route add 10.0.0.0/24 dev r0-eth1",
            "ip -l addr -- addr flush dev r0-eth1",
            "bridge -f fdb fdb add 00:11:22:33:44:55 dev s1-eth1",
            "tc -s qdisc add dev r0-eth1 root netem loss 1%",
        ] {
            let why = read_only(&ok(line)).expect_err(line);
            assert!(why.contains("not a read-only command"), "{line}: {why}");
        }
    }
}
