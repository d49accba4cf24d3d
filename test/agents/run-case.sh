#!/usr/bin/env bash
# One end-to-end agent case, offline: the agent → the edge (dist/bin/main.js) → upstream.mjs (a fake Chat
# Completions model), all three inside one loopback-only network namespace (root needed: unshare -n -m).
#
#   OUT=/some/dir test/agents/run-case.sh codex-native|codex-markup|claude-native|claude-markup
#
# (chat-native / chat-markup: the same with chat-agent.mjs, a minimal Chat Completions client, as the agent: the
# harness's baseline, for when a real agent fails.)
#
# native: the upstream answers with `tool_calls` deltas; markup: it writes `<tool_call>{…}</tool_call>` in content
# and the edge's model runs in `tools: "text"` mode (tools described in the system prompt, `toolFormats: ["xml"]`).
#
# OUT gets: edge.json (the edge's config), edge.stdout / edge.stderr (its JSON log lines), upstream.jsonl (every
# request the upstream got and what it answered), dns.jsonl (every name looked up: dnslog.mjs answers NXDOMAIN),
# auth (`wrong_key=<status> no_key=<status>`: two requests to the agent's route before it runs, with a wrong key
# and with none, and auth-wrong.json / auth-none.json, their bodies), stdout / stderr of the agent, rc (`rc=<agent exit> ms=<agent wall ms> edge_ready_ms=<edge start to /healthz>`),
# and the agent's home (codex-home/ or home/) and cwd (work/).
# rc 0 is the agent's; 90 means the edge or the upstream never became ready (the agent did not run).
#
# Env: CODEX_BIN, CLAUDE_BIN (default: the binaries of test/agents/node_modules, `npm ci --prefix test/agents`),
# EDGE_BIN (default dist/bin/main.js; `npm run build`), CODEX_MODEL (default gpt-5.5), CLAUDE_MODEL (default
# claude-sonnet-4-5), AGENT_TIMEOUT (seconds, default 60), PROMPT.
# Every process is bounded: the agent by `timeout`, the edge's start by EDGE_START_TIMEOUT (default 20 s); the edge,
# the upstream and the DNS stub are killed when the agent is done (TERM, then KILL after 3 s).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
CASE="${1:?usage: OUT=dir run-case.sh codex-native|codex-markup|claude-native|claude-markup|chat-native|chat-markup}"
: "${OUT:?OUT=output directory}"
AGENT="${CASE%%-*}"
STYLE="${CASE#*-}"
case "$AGENT/$STYLE" in codex/native|codex/markup|claude/native|claude/markup|chat/native|chat/markup) ;; *) echo "unknown case $CASE" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "run-case.sh: needs root (unshare -n -m)" >&2; exit 2; }

first() { for f in "$@"; do [ -x "$f" ] && { echo "$f"; return; }; done; echo "${1}"; }
CODEX_BIN="${CODEX_BIN:-$(first "$here"/node_modules/@openai/codex-linux-*/vendor/*/bin/codex)}"
CLAUDE_BIN="${CLAUDE_BIN:-$(first "$here"/node_modules/@anthropic-ai/claude-code-linux-*/claude "$here/node_modules/@anthropic-ai/claude-code/bin/claude.exe")}"
EDGE_BIN="${EDGE_BIN:-$root/dist/bin/main.js}"
CODEX_MODEL="${CODEX_MODEL:-gpt-5.5}"
CLAUDE_MODEL="${CLAUDE_MODEL:-claude-sonnet-4-5}"
PROMPT="${PROMPT:-Run the shell command 'echo hi' and tell me what it printed.}"
EDGE_PORT=8080       # the namespace has its own loopback: every case can use the same ports, even in parallel
UPSTREAM_PORT=8787
EDGE_KEY=sk-iop-agents-e2e
[ -f "$EDGE_BIN" ] || { echo "run-case.sh: $EDGE_BIN missing (npm run build)" >&2; exit 2; }
bin="$(case $AGENT in codex) echo "$CODEX_BIN" ;; claude) echo "$CLAUDE_BIN" ;; chat) echo /bin/sh ;; esac)"
[ -x "$bin" ] || { echo "run-case.sh: $bin missing (npm ci --prefix test/agents)" >&2; exit 2; }

rm -rf "$OUT" && mkdir -p "$OUT/work"

# The agent asks for its own model names (Claude Code also has a small/fast model); the edge answers them all with
# one model.
tools=$([ "$STYLE" = markup ] && echo text || echo native)
aliases=""
for name in "$CODEX_MODEL" "$CLAUDE_MODEL" claude-sonnet-4-5 claude-haiku-4-5 claude-haiku-4-5-20251001 claude-3-5-haiku-20241022; do
  [ "$name" = local-coder ] || case " $aliases " in *" \"$name\","*) ;; *) aliases="$aliases \"$name\"," ;; esac
done
aliases="[${aliases%,} ]"
cat >"$OUT/edge.json" <<EOF
{
  "server": {
    "host": "127.0.0.1",
    "port": $EDGE_PORT,
    "apiKeys": [{ "key": "$EDGE_KEY", "name": "agents-e2e" }],
    "shutdownGraceMs": 1000
  },
  "log": { "level": "info" },
  "models": [
    {
      "id": "local-coder",
      "aliases": $aliases,
      "provider": { "type": "openai", "baseUrl": "http://127.0.0.1:$UPSTREAM_PORT/v1", "model": "fake-coder" },
      "tools": "$tools",
      "toolFormats": ["xml"]
    }
  ]
}
EOF

if [ "$AGENT" = codex ]; then
  tool=exec_command
  args='{"cmd":"echo hi"}'
  mkdir -p "$OUT/codex-home" "$OUT/home"
  # NOTES.md: wire_api "responses" is the only one Codex has; the quieting keys keep it off every other host.
  cat >"$OUT/codex-home/config.toml" <<EOF
model = "$CODEX_MODEL"
model_provider = "iop"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.iop]
name = "iop edge"
base_url = "http://127.0.0.1:$EDGE_PORT/v1"
wire_api = "responses"
env_key = "IOP_EDGE_API_KEY"

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
EOF
elif [ "$AGENT" = claude ]; then
  tool=Bash
  args='{"command":"echo hi","description":"Print hi"}'
  mkdir -p "$OUT/home"
else
  tool=exec_command
  args='{"cmd":"echo hi"}'
fi

export OUT AGENT STYLE CODEX_BIN CLAUDE_BIN EDGE_BIN CODEX_MODEL CLAUDE_MODEL PROMPT EDGE_PORT UPSTREAM_PORT EDGE_KEY here tool args
exec unshare -n -m bash -c '
  set -u
  pids=()
  stop() {  # TERM every helper, KILL what is left after 3 s
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 30); do
      alive=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ $alive = 0 ] && break; sleep 0.1
    done
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
  }
  trap stop EXIT
  ip link set lo up
  # Name look-ups go to dnslog.mjs (logged, NXDOMAIN): shows any host the agent or the edge tries besides loopback.
  echo "nameserver 127.0.0.1" >"$OUT/resolv.conf" && mount --bind "$OUT/resolv.conf" /etc/resolv.conf
  DNSLOG_FILE=$OUT/dns.jsonl node "$here/dnslog.mjs" </dev/null 2>"$OUT/dnslog.err" & pids+=($!)
  UPSTREAM_PORT=$UPSTREAM_PORT UPSTREAM_LOG=$OUT/upstream.jsonl UPSTREAM_STYLE=$STYLE UPSTREAM_TOOL=$tool UPSTREAM_ARGS=$args \
    node "$here/upstream.mjs" </dev/null 2>"$OUT/upstream.err" & pids+=($!)
  t0=$(date +%s%N)
  node "$EDGE_BIN" edge --config "$OUT/edge.json" --log-level info </dev/null >"$OUT/edge.stdout" 2>"$OUT/edge.stderr" & edge=$!; pids+=($edge)
  ready=0
  for _ in $(seq $(( ${EDGE_START_TIMEOUT:-20} * 10 ))); do
    kill -0 $edge 2>/dev/null || break
    if curl -sf -m 1 -o /dev/null "http://127.0.0.1:$EDGE_PORT/healthz" && (exec 3<>/dev/tcp/127.0.0.1/$UPSTREAM_PORT) 2>/dev/null; then
      ready=1; break
    fi
    sleep 0.1
  done
  edge_ready_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ $ready = 0 ]; then
    echo "rc=90 ms=0 edge_ready_ms=$edge_ready_ms" >"$OUT/rc"
    echo "edge or upstream not ready after ${edge_ready_ms} ms (edge alive: $(kill -0 $edge 2>/dev/null && echo yes || echo no))" >"$OUT/stderr"
    exit 90
  fi
  # The edge checks keys: a wrong key and no key are refused (401) on the route the agent uses, before it runs.
  case $AGENT in
    codex) route=/v1/responses; wrong="authorization: Bearer sk-wrong" ;;
    claude) route=/v1/messages; wrong="x-api-key: sk-wrong" ;;
    *) route=/v1/chat/completions; wrong="authorization: Bearer sk-wrong" ;;
  esac
  probe() { curl -s -m 5 -o "$OUT/auth-$1.json" -w "%{http_code}" -H "content-type: application/json" "${@:2}" \
    -d "{\"model\":\"local-coder\",\"max_tokens\":16,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"input\":\"hi\"}" \
    "http://127.0.0.1:$EDGE_PORT$route"; }
  echo "wrong_key=$(probe wrong -H "$wrong") no_key=$(probe none)" >"$OUT/auth"
  cd "$OUT/work"
  start=$(date +%s%N)
  if [ "$AGENT" = codex ]; then
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$OUT/home" CODEX_HOME="$OUT/codex-home" TERM=dumb LANG=C.UTF-8 \
      IOP_EDGE_API_KEY=$EDGE_KEY \
      timeout -k 5 "${AGENT_TIMEOUT:-60}" "$CODEX_BIN" exec --skip-git-repo-check --strict-config "$PROMPT" \
      </dev/null >"$OUT/stdout" 2>"$OUT/stderr"
  elif [ "$AGENT" = chat ]; then
    CHAT_BASE_URL=http://127.0.0.1:$EDGE_PORT/v1 CHAT_API_KEY=$EDGE_KEY CHAT_MODEL=local-coder \
      timeout -k 5 "${AGENT_TIMEOUT:-60}" node "$here/chat-agent.mjs" "$PROMPT" </dev/null >"$OUT/stdout" 2>"$OUT/stderr"
  else
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$OUT/home" TERM=dumb LANG=C.UTF-8 \
      ANTHROPIC_BASE_URL=http://127.0.0.1:$EDGE_PORT ANTHROPIC_API_KEY=$EDGE_KEY \
      DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
      timeout -k 5 "${AGENT_TIMEOUT:-60}" "$CLAUDE_BIN" -p --model "$CLAUDE_MODEL" --allowedTools=Bash "$PROMPT" \
      </dev/null >"$OUT/stdout" 2>"$OUT/stderr"
  fi
  rc=$?
  echo "rc=$rc ms=$(( ($(date +%s%N) - start) / 1000000 )) edge_ready_ms=$edge_ready_ms" >"$OUT/rc"
  exit $rc
'
