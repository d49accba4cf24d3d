#!/usr/bin/env bash
# Runs `codex exec` once, offline, against test/agents/recorder.mjs, inside a loopback-only network namespace.
#
#   CODEX_BIN=/path/to/codex OUT=/some/dir test/agents/run-codex.sh [codex exec args...] "prompt"
#
# OUT gets: requests.jsonl (the recorder's log), stdout, stderr, rc (exit code + milliseconds), config.toml, and
# codex-home/ (CODEX_HOME: sessions, logs). Recorder knobs (RECORDER_DROP, RECORDER_COMMAND, ...) pass through.
# Needs root (unshare -n -m). dns.jsonl: the names it looked up (dnslog.mjs answers NXDOMAIN).
# Every run is bounded by `timeout ${AGENT_TIMEOUT:-120}`. CODEX_MODEL picks the model slug (default recorder-model).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${CODEX_BIN:?CODEX_BIN=path to the codex binary}"
: "${OUT:?OUT=output directory}"
PORT="${RECORDER_PORT:-8787}"
MODEL="${CODEX_MODEL:-recorder-model}"
rm -rf "$OUT" && mkdir -p "$OUT/codex-home" "$OUT/work"
# CODEX_MINIMAL=1 leaves out the quieting keys (update check, analytics, feedback, otel, plugins) to see what they stop.
quiet=$([ -n "${CODEX_MINIMAL:-}" ] || printf '%s\n' 'check_for_update_on_startup = false')
cat >"$OUT/codex-home/config.toml" <<EOF
model = "$MODEL"
model_provider = "recorder"
approval_policy = "never"
sandbox_mode = "danger-full-access"
$quiet

[model_providers.recorder]
name = "recorder"
base_url = "http://127.0.0.1:$PORT/v1"
wire_api = "responses"
env_key = "RECORDER_API_KEY"
EOF
[ -n "${CODEX_MINIMAL:-}" ] || cat >>"$OUT/codex-home/config.toml" <<EOF

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

# Plugins sync looks up github.com, api.github.com and chatgpt.com at start; the request is the same without it.
[features]
plugins = false
EOF
cp "$OUT/codex-home/config.toml" "$OUT/config.toml"
export OUT PORT CODEX_BIN here
exec unshare -n -m bash -c '
  set -u
  ip link set lo up
  # Name look-ups go to dnslog.mjs (logged, NXDOMAIN): shows which other hosts the agent tries.
  echo "nameserver 127.0.0.1" >"$OUT/resolv.conf" && mount --bind "$OUT/resolv.conf" /etc/resolv.conf
  DNSLOG_FILE=$OUT/dns.jsonl node "$here/dnslog.mjs" & dp=$!
  RECORDER_PORT=$PORT RECORDER_LOG=$OUT/requests.jsonl node "$here/recorder.mjs" 2>"$OUT/recorder.err" & rp=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
  cd "$OUT/work"
  start=$(date +%s%N)
  CODEX_HOME=$OUT/codex-home RECORDER_API_KEY=sk-recorder-test \
    timeout "${AGENT_TIMEOUT:-120}" "$CODEX_BIN" exec --skip-git-repo-check --strict-config "$@" \
    </dev/null >"$OUT/stdout" 2>"$OUT/stderr"
  rc=$?
  end=$(date +%s%N)
  echo "rc=$rc ms=$(( (end - start) / 1000000 ))" >"$OUT/rc"
  kill $rp $dp; wait $rp $dp 2>/dev/null
  exit $rc
' bash "$@"
