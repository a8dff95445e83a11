#!/usr/bin/env bash
# A real GNS3 server on 127.0.0.1 for netdojo-gns3's integration tests, eval and bench.
#
#   bash .ci/gns3-server.sh install          # once: venv, vpcs, dynamips, netdojo's ubridge
#   bash .ci/gns3-server.sh start DIR        # starts a server, writes DIR/url and DIR/pid
#   bash .ci/gns3-server.sh stop DIR         # stops the server started in DIR (by its PID)
#
# What it installs (docs/gns3.md explains why each piece):
# - gns3-server 3.0.6 from PyPI in a venv ($NETDOJO_GNS3_PREFIX/venv);
# - Debian's vpcs 0.5b2, behind a wrapper that reports version 0.6.1 (GNS3 refuses < 0.6.1;
#   the options GNS3 passes work on 0.5b2);
# - dynamips 0.2.14 from Debian bookworm's non-free component, fetched with `apt-get download`
#   through a private sources list (the machine's own sources stay untouched) and unpacked
#   with `dpkg -x` (GNS3 runs Ethernet switches and hubs in dynamips);
# - ubridge: netdojo's own implementation (crates/netdojo-ubridge), built with cargo.
# The server binds to 127.0.0.1 on a free port, with its own HOME, config and project
# directory under DIR. API v3, user admin, password admin.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
prefix="${NETDOJO_GNS3_PREFIX:-/var/cache/netdojo-gns3}"
venv="$prefix/venv"
GNS3_VERSION=3.0.6

log() { printf 'gns3-server.sh: %s\n' "$*" >&2; }

do_install() {
  mkdir -p "$prefix/bin"
  if ! "$venv/bin/gns3server" --version 2>/dev/null | grep -q "$GNS3_VERSION"; then
    log "installing gns3-server==$GNS3_VERSION in $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "gns3-server==$GNS3_VERSION"
  fi
  local missing=()
  for p in vpcs libpcap0.8 libelf1; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  python3 -m venv --help >/dev/null 2>&1 || missing+=(python3-venv)
  if [ "${#missing[@]}" -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
  fi
  # VPCS: GNS3 reads the version from `vpcs -v` and wants >= 0.6.1.
  cat > "$prefix/bin/vpcs" <<'EOF'
#!/bin/sh
# Debian's vpcs 0.5b2, reporting 0.6.1 to GNS3's version check (netdojo .ci/gns3-server.sh).
if [ "${1:-}" = "-v" ]; then
  /usr/bin/vpcs -v | sed 's/version 0\.5b2/version 0.6.1/'
  exit 0
fi
exec /usr/bin/vpcs "$@"
EOF
  chmod +x "$prefix/bin/vpcs"
  if [ ! -x "$prefix/dynamips/usr/bin/dynamips" ]; then
    log "fetching dynamips from bookworm non-free"
    local apt="$prefix/apt"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/deb"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free" \
      > "$apt/sources.list"
    local opts=(-q -o "Dir::Etc::sourcelist=$apt/sources.list" -o Dir::Etc::sourceparts=- \
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" update >/dev/null
    (cd "$apt/deb" && apt-get "${opts[@]}" download dynamips >/dev/null)
    dpkg -x "$apt"/deb/dynamips_*.deb "$prefix/dynamips"
  fi
  # (captured, not piped: grep -q would end the pipe early and pipefail would see SIGPIPE)
  local out
  out="$(cd "$prefix" && "$prefix/dynamips/usr/bin/dynamips" --help 2>&1 || true)"
  [[ "$out" == *"Cisco Router Simulation Platform"* ]] || { log "dynamips does not run: $out"; exit 1; }
  log "building netdojo's ubridge"
  cargo build -q -p netdojo-ubridge --bin ubridge
  local target
  target="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
  install -m 0755 "$target/debug/ubridge" "$prefix/bin/ubridge"
  out="$("$prefix/bin/ubridge" -v 2>&1 || true)"
  [[ "$out" == *"ubridge version"* ]] || { log "ubridge does not run: $out"; exit 1; }
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  local dir="$1"
  # Every step is skipped when done already; ubridge is rebuilt when its source changed.
  do_install
  mkdir -p "$dir/home" "$dir/projects" "$dir/images"
  local port
  port="$(free_port)"
  cat > "$dir/gns3_server.conf" <<EOF
[Server]
host = 127.0.0.1
port = $port
report_errors = False
ubridge_path = $prefix/bin/ubridge
projects_path = $dir/projects
images_path = $dir/images
appliances_path = $dir/appliances
symbols_path = $dir/symbols
configs_path = $dir/configs

[VPCS]
vpcs_path = $prefix/bin/vpcs

[Dynamips]
dynamips_path = $prefix/dynamips/usr/bin/dynamips

[Qemu]
enable_hardware_acceleration = False
EOF
  # PATH first: GNS3 resolves ubridge_path and vpcs_path through shutil.which.
  HOME="$dir/home" PATH="$prefix/bin:$PATH" setsid "$venv/bin/gns3server" --host 127.0.0.1 --port "$port" \
    --local --config "$dir/gns3_server.conf" --log "$dir/gns3server.log" </dev/null >"$dir/stdout.log" 2>&1 &
  echo $! > "$dir/pid"
  local url="http://127.0.0.1:$port"
  for _ in $(seq 1 150); do
    if version="$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' "$url/v3/version" 2>/dev/null)"; then
      echo "$url" > "$dir/url"
      log "GNS3 $version at $url (pid $(cat "$dir/pid"))"
      echo "$url"
      return 0
    fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      log "gns3server exited; its log:"; tail -n 30 "$dir/stdout.log" "$dir/gns3server.log" >&2 || true
      exit 1
    fi
    sleep 0.2
  done
  log "gns3server did not answer on $url in 30 s"; tail -n 30 "$dir/gns3server.log" >&2 || true
  stop "$dir"
  exit 1
}

stop() {
  local dir="$1" pid
  [ -f "$dir/pid" ] || return 0
  pid="$(cat "$dir/pid")"
  # setsid made the server a process-group leader: its group holds its vpcs, dynamips and
  # ubridge children, and nothing else.
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pid"
}

case "${1:-}" in
  install) do_install ;;
  start) start "${2:?usage: gns3-server.sh start DIR}" ;;
  stop) stop "${2:?usage: gns3-server.sh stop DIR}" ;;
  *) echo "usage: $0 install | start DIR | stop DIR" >&2; exit 2 ;;
esac
