//! `ubridge -v` and `ubridge -H HOST:PORT`, the two ways GNS3 runs it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use netdojo_ubridge::{Hypervisor, VERSION, serve};

const USAGE: &str = "usage: ubridge -v | ubridge -H [HOST:]PORT [-d LEVEL]\n\
    netdojo's ubridge: the ubridge hypervisor protocol with UDP-to-UDP bridges on loopback";

fn parse_listen(arg: &str) -> Result<SocketAddr, String> {
    let (host, port) = match arg.rsplit_once(':') {
        Some((h, p)) => (h.trim_matches(['[', ']']), p),
        None => ("127.0.0.1", arg),
    };
    let port: u16 = port.parse().map_err(|_| format!("-H {arg}: `{port}` is not a TCP port"))?;
    let ip: IpAddr = match host {
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        h => h.parse().map_err(|_| format!("-H {arg}: `{h}` is not an IP address"))?,
    };
    // GNS3 passes its own bind address. netdojo's ubridge serves loopback only.
    if !ip.is_loopback() {
        return Err(format!("-H {arg}: netdojo's ubridge listens on a loopback address only"));
    }
    Ok(SocketAddr::new(ip, port))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut listen = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-v" => {
                println!("ubridge version {VERSION} (netdojo-ubridge: UDP-to-UDP bridges)");
                return ExitCode::SUCCESS;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "-H" => match it.next().map(|s| parse_listen(s)) {
                Some(Ok(addr)) => listen = Some(addr),
                Some(Err(e)) => {
                    eprintln!("ubridge: {e}");
                    return ExitCode::from(2);
                }
                None => {
                    eprintln!("ubridge: -H needs [HOST:]PORT\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            // Debug level: logs go to stderr through RUST_LOG instead.
            "-d" => {
                it.next();
            }
            other => {
                eprintln!("ubridge: unknown argument `{other}`\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(addr) = listen else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ubridge: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        tracing::info!("hypervisor listening on {addr}");
        serve(listener, Hypervisor::new()).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ubridge: {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}
