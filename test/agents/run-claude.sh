#!/usr/bin/env bash
# Runs `claude -p` once, offline, against test/agents/recorder.mjs, inside a loopback-only network namespace.
#
#   CLAUDE_BIN=/path/to/claude OUT=/some/dir test/agents/run-claude.sh [claude args...] "prompt"
#
# OUT gets: requests.jsonl (the recorder's log), stdout, stderr, rc (exit code + milliseconds), home/ (the temporary
# HOME: ~/.claude.json, ~/.claude/ sessions), work/ (the cwd). Recorder knobs (RECORDER_DROP, ...) pass through.
# Default model: CLAUDE_MODEL or claude-sonnet-4-5. CLAUDE_EXTRA_ENV: more VAR=value words for env(1).
# Needs root (unshare -n -m); dns.jsonl: the names it looked up. Bounded by `timeout ${AGENT_TIMEOUT:-120}`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${CLAUDE_BIN:?CLAUDE_BIN=path to the claude binary}"
: "${OUT:?OUT=output directory}"
PORT="${RECORDER_PORT:-8787}"
MODEL="${CLAUDE_MODEL:-claude-sonnet-4-5}"
rm -rf "$OUT" && mkdir -p "$OUT/home" "$OUT/work"
export OUT PORT CLAUDE_BIN MODEL here
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
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=$OUT/home TERM=dumb LANG=C.UTF-8 \
    ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT \
    ANTHROPIC_API_KEY=sk-ant-recorder-test \
    DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    ${CLAUDE_EXTRA_ENV:-} \
    timeout "${AGENT_TIMEOUT:-120}" "$CLAUDE_BIN" -p --model "$MODEL" --allowedTools=Bash "$@" \
    </dev/null >"$OUT/stdout" 2>"$OUT/stderr"
  rc=$?
  end=$(date +%s%N)
  echo "rc=$rc ms=$(( (end - start) / 1000000 ))" >"$OUT/rc"
  kill $rp $dp; wait $rp $dp 2>/dev/null
  exit $rc
' bash "$@"
