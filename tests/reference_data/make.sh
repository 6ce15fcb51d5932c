#!/bin/sh
# Regenerates tests/reference_data/fixture/ (docs/operations.md, "Moving from the reference server"):
# the reference server's own code (seed-hypermedia/seed 7819d47, agents/) writes a data directory
# under Bun, driven by make_fixture.ts. Bun and the reference's dependencies are installed from
# the npm registry into a scratch directory that is removed afterwards (nothing of it is kept).
# The monorepo's @shm/shared is not in the checkout: its `blobs` and `cbor` are re-exported from
# @seed-hypermedia/client (frontend/packages/client), which is where that code lives now.
#
#   tests/reference_data/make.sh /path/to/seed-checkout
set -eu
REF=${1:?usage: make.sh /path/to/seed-checkout}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/seed/frontend/packages/shared"
cp -r "$REF/agents" "$WORK/seed/agents"
cp -r "$REF/frontend/packages/client" "$WORK/seed/frontend/packages/client"
cd "$WORK/seed/frontend/packages/shared"
echo '{"name": "@shm/shared", "version": "0.0.0", "type": "module", "exports": {"./blobs": "./blobs.ts", "./cbor": "./cbor.ts"}}' > package.json
echo "export * from '@seed-hypermedia/client/blobs'" > blobs.ts
echo "export * from '@seed-hypermedia/client/cbor'" > cbor.ts
cd "$WORK" && echo '{"private": true}' > package.json && npm install --silent --no-audit --no-fund bun@1.4 >/dev/null
cd "$WORK/seed/agents" && rm -f bun.lock && "$WORK/node_modules/.bin/bun" install --silent >/dev/null
cp "$HERE/make_fixture.ts" e2e/make_fixture.ts
# No network: the HM server is a closed port on loopback; the model is make_fixture.ts's own.
OUT="$WORK/fixture" SEED_AGENTS_HM_SERVER_URL=http://127.0.0.1:9 "$WORK/node_modules/.bin/bun" e2e/make_fixture.ts >"$WORK/log" 2>&1 ||
    { tail -40 "$WORK/log"; exit 1; }
rm -rf "$HERE/fixture"
cp -r "$WORK/fixture" "$HERE/fixture"
echo "wrote $HERE/fixture"
