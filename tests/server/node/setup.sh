#!/usr/bin/env bash
# Installs the npm packages of the client tests into build/node (ignored by git).
# Usage: tests/server/node/setup.sh [DEST]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$here/../../../build/node}"
mkdir -p "$dest"
cp "$here/package.json" "$dest/package.json"
cd "$dest"
npm install --no-audit --no-fund --loglevel=error
