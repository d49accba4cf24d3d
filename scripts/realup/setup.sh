#!/bin/bash
# setup.sh: install and build a REAL llama.cpp `llama-server` plus a tiny random-weight GGUF model, offline
# (npm registry + Debian packages + the machine's Python package index only). Idempotent: re-running skips every
# step already done. The install of `npm run test:realup` (test/realup); CI runs it as root on a fresh Debian.
# Taken from the development scripts shared with this project's sessions (realup), with the toolchain check
# adapted for a fresh machine.
#
# Where the code comes from (no hub, no GitHub download):
#   - npm `node-llama-cpp@3.21.1` ships llama/gitRelease.bundle: a git bundle of the full llama.cpp source at
#     the release it was built from (tag v0.4.0, commit 80fb11ac, Sep 2026), tools/server included.
#   - npm `@node-llama-cpp/linux-x64@3.21.1` ships that same release prebuilt as shared libraries
#     (libllama, libllama-common, libggml*, with CPU variants picked at run time).
# Build modes (REALUP_BUILD):
#   hybrid (default): compile only llama-server's own code (tools/server + tools/mtmd, cpp-httplib, ui stub)
#                     from the source and link it against the prebuilt libs from the same release (~80 files).
#   full:             compile everything from source with cmake (~330 files; ~45+ min on 2 busy cores).
# Result, under $REALUP_HOME (default ~/.cache/iop-realup): bin/llama-server (+ its .so files, rpath $ORIGIN),
#   models/tiny.gguf, tiny-qwen.gguf, tiny-badutf8.gguf.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)          # the scripts (may be read-only)
OUT=${REALUP_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/iop-realup}   # everything they build and run
mkdir -p "$OUT"
W=$OUT/work
SRC=$W/llama.cpp
B=$SRC/build
BIN=$OUT/bin
MODE=${REALUP_BUILD:-hybrid}
NLC_VER=3.21.1
COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed
mkdir -p "$W" "$BIN" "$OUT/models"
t0=$(date +%s)
step() { echo "[setup $(( $(date +%s) - t0 ))s] $*"; }

# 1. toolchain (Debian). A fresh Debian often has python3 without venv/ensurepip (package python3-venv): without
#    it step 6 falls back to the system python, which needs numpy, and only the qwen2-vocab model can be built.
need=()
for c in cmake g++ make git curl python3; do command -v "$c" >/dev/null || need+=("$c"); done
[ ! -x "$OUT/venv/bin/python" ] && ! python3 -c 'import venv, ensurepip' 2>/dev/null && need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  step "apt-get install (missing: ${need[*]})"
  [ "$(id -u)" = 0 ] || { echo "setup.sh: missing ${need[*]}; install them (apt-get needs root)" >&2; exit 1; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake build-essential git curl python3 python3-venv >/dev/null
fi

# 2. npm tarballs (npm pack: no install scripts run, nothing downloaded besides the two tarballs)
cd "$W"
[ -f node-llama-cpp-$NLC_VER.tgz ] || { step "npm pack node-llama-cpp@$NLC_VER"; npm pack --silent node-llama-cpp@$NLC_VER >/dev/null; }
if [ "$MODE" = hybrid ] && [ ! -f node-llama-cpp-linux-x64-$NLC_VER.tgz ]; then
  step "npm pack @node-llama-cpp/linux-x64@$NLC_VER"; npm pack --silent @node-llama-cpp/linux-x64@$NLC_VER >/dev/null
fi

# 3. llama.cpp source from the bundle
if [ ! -d "$SRC/.git" ]; then
  step "clone llama.cpp from node-llama-cpp's git bundle"
  tar -xzf node-llama-cpp-$NLC_VER.tgz package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
  git clone -q package/llama/gitRelease.bundle "$SRC"
fi
[ "$(git -C "$SRC" rev-parse HEAD)" = "$COMMIT" ] || { echo "unexpected llama.cpp commit" >&2; exit 1; }

# 4. configure (no OpenSSL, no Web UI download, no tests/examples; portable AVX2 build for 'full' mode)
if [ ! -f "$B/CMakeCache.txt" ]; then
  step "cmake configure"
  nice -n 19 cmake -S "$SRC" -B "$B" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON >"$W/cmake-config.log"
fi

# 5. build
objs() { # objects of a CMake target (Makefile generator), relative to the build dir
  sed -n "/^$1_OBJECTS = /,/^\$/p" "$B/$2/build.make" | grep -oE '"?CMakeFiles/[^" ]+\.o"?' | tr -d '"' | sed "s#^#$(dirname "$(dirname "$2")")/#"
}
if [ ! -x "$BIN/llama-server" ] || ! "$BIN/llama-server" --version >/dev/null 2>&1; then
  if [ "$MODE" = full ]; then
    step "full build: cmake --build --target llama-server (slow)"
    nice -n 19 cmake --build "$B" --target llama-server -j 2 >"$W/build-full.log" 2>&1
    cp -a "$B"/bin/llama-server "$B"/bin/lib*.so* "$BIN"/
  else
    step "hybrid build: prebuilt libs + compile server/mtmd objects"
    P=$W/prebuilt
    if [ ! -f "$P/libllama.v0.4.0.so" ]; then
      mkdir -p "$P" && tar -xzf node-llama-cpp-linux-x64-$NLC_VER.tgz -C "$P" --strip-components=3 package/bins/linux-x64
    fi
    nice -n 19 make -C "$B" -j2 llama-ui cpp-httplib vendor-hash llama-common-base >"$W/build-hybrid.log" 2>&1
    SC=$(objs server__context tools/server/CMakeFiles/server-context.dir)
    SI=$(objs llama__server__impl tools/server/CMakeFiles/llama-server-impl.dir)
    SM=$(objs llama__server tools/server/CMakeFiles/llama-server.dir)
    MT=$(objs mtmd tools/mtmd/CMakeFiles/mtmd.dir)
    (cd "$B" && nice -n 19 make -j2 -f tools/server/CMakeFiles/server-context.dir/build.make $SC \
       && nice -n 19 make -j2 -f tools/server/CMakeFiles/llama-server-impl.dir/build.make $SI \
       && nice -n 19 make -j2 -f tools/server/CMakeFiles/llama-server.dir/build.make $SM \
       && nice -n 19 make -j2 -f tools/mtmd/CMakeFiles/mtmd.dir/build.make $MT) >>"$W/build-hybrid.log" 2>&1
    step "link llama-server against the prebuilt libllama/libllama-common/libggml"
    cp -a "$P"/*.so "$BIN"/
    (cd "$B" && nice -n 19 c++ -O3 -o "$BIN/llama-server" $SM $SI $SC $MT \
       tools/ui/libllama-ui.a vendor/cpp-httplib/libcpp-httplib.a vendor/hash/libvendor-hash.a \
       "$BIN/libllama-common.so" common/libllama-common-base.a \
       "$BIN/libllama.v0.4.0.so" "$BIN/libggml.v0.4.0.so" "$BIN/libggml-base.so" \
       -Wl,-rpath,'$ORIGIN' -lpthread -ldl) >>"$W/build-hybrid.log" 2>&1
  fi
  "$BIN/llama-server" --version 2>&1 | head -3
fi

# 6. python for the model builder: gguf, numpy, tokenizers (from the machine's package index; --retries 0
#    because an unreachable default index would otherwise be retried with back-off)
PY=$OUT/venv/bin/python
if [ ! -x "$PY" ] || ! "$PY" -c 'import gguf, numpy, tokenizers' 2>/dev/null; then
  step "python venv with gguf, numpy, tokenizers"
  if ! { python3 -m venv "$OUT/venv" && "$OUT/venv/bin/pip" install -q --retries 0 gguf numpy tokenizers; }; then
    step "pip failed; using llama.cpp/gguf-py with the system python (only the qwen2-vocab model can be built)"
    PY="env PYTHONPATH=$SRC/gguf-py python3"
  fi
fi

# 7. models
#   tiny.gguf         4096-token BPE trained here (fast; the default for start.sh)
#   tiny-qwen.gguf    real Qwen2 vocabulary (151,936 tokens; realistic token counts; ~5x slower under load)
#   tiny-badutf8.gguf 4096-token BPE that may emit lone UTF-8 bytes: llama-server's chat parser then fails
#                     mid-stream (HTTP 200, then `data: {"error":{"code":500,...}}`, no [DONE])
build() { # name, builder args...
  local name=$1; shift
  [ -f "$OUT/models/$name.gguf" ] && return 0
  step "build models/$name.gguf"
  nice -n 19 $PY "$HERE/build_model.py" --llama-src "$SRC" --out "$OUT/models/$name.gguf.tmp" "$@" \
    && mv "$OUT/models/$name.gguf.tmp" "$OUT/models/$name.gguf"
}
build tiny-qwen --tokenizer qwen2
if $PY -c 'import tokenizers' 2>/dev/null; then
  build tiny --tokenizer bpe
  build tiny-badutf8 --tokenizer bpe --allow-invalid-utf8
else
  [ -f "$OUT/models/tiny.gguf" ] || cp "$OUT/models/tiny-qwen.gguf" "$OUT/models/tiny.gguf"
fi
step "done: $BIN/llama-server, $OUT/models/tiny.gguf; start with: $HERE/start.sh PORT"
