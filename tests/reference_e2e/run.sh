#!/bin/sh
# Runs the reference's own live check of agent obligations (seed-hypermedia/seed 7819d47,
# agents/e2e/obligations-live-check.ts with its scripted provider, both files unchanged) against
# this server, under Node with tsx. The check imports three reference modules that need Bun or
# the monorepo; shims/ stands in for what it uses of them (a Seed key pair, DAG-CBOR, the signed
# envelope), and bun-shim.mjs gives the scripted provider Bun.serve on Node's http.
#
#   tests/reference_e2e/run.sh /path/to/seed-checkout [stubborn]
#
# Needs node and the npm registry (tsx, @noble/curves, @ipld/dag-cbor, in a scratch directory).
set -eu
REF=${1:?usage: run.sh /path/to/seed-checkout [stubborn]}
MODE=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d)
trap 'kill $SERVER $PROVIDER 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/e2e" "$WORK/src" "$WORK/shm" "$WORK/data"
cp "$REF/agents/e2e/obligations-live-check.ts" "$REF/agents/e2e/scripted-provider.ts" "$WORK/e2e/"
cp "$HERE/shims/cbor.ts" "$HERE/shims/api-service.ts" "$WORK/src/"
cp "$HERE/shims/blobs.ts" "$WORK/shm/"
cp "$HERE/bun-shim.mjs" "$HERE/tsconfig.json" "$WORK/"
echo '{"type": "module"}' > "$WORK/package.json"
(cd "$WORK" && npm install --silent --no-audit --no-fund tsx @noble/curves@1 @ipld/dag-cbor@9 >/dev/null)
"$ROOT/.venv/bin/python" -m seed_agents.server.main --host 127.0.0.1 --port 3099 --data-dir "$WORK/data" \
    --allow-provider-base-url true >"$WORK/server.log" 2>&1 &
SERVER=$!
cd "$WORK"
MODE=$MODE PORT=4099 node --import ./bun-shim.mjs --import tsx e2e/scripted-provider.ts >"$WORK/provider.log" 2>&1 &
PROVIDER=$!
for _ in $(seq 100); do
    curl -sf http://127.0.0.1:3099/api/health >/dev/null && break
    sleep 0.1
done
MODE=$MODE BASE=http://127.0.0.1:3099 PROVIDER_URL=http://127.0.0.1:4099/v1 node --import tsx e2e/obligations-live-check.ts
