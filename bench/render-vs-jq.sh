#!/usr/bin/env bash
# Whole-process comparison of `devbox-config render` (all three targets) with
# the pi-devbox entrypoint's `jq -s '.[0] * .[1]'` doing only the pi merge, on
# the same files (testdata/bench: a 215-line opencode.jsonc with comments, pi
# settings, pi's mcp.json). Runs alternate; see BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$work/devbox-config" ./cmd/devbox-config
home=$work/home
mkdir -p "$home/.config/opencode" "$home/.pi/agent" "$home/bin"
cp testdata/bench/opencode.jsonc "$home/.config/opencode/"
cp testdata/bench/pi-settings.json "$home/.pi/agent/settings.json"
printf '{\n  "mcpServers": {}\n}\n' > "$home/.pi/agent/mcp.json"
printf '#!/bin/sh\n' > "$home/bin/mempalace-mcp"; chmod +x "$home/bin/mempalace-mcp"
tmpl=testdata/bench/pi-template.json
env="PATH=$home/bin:/usr/bin:/bin MEMPALACE_REMOTE_URL=https://palace.example.org/mcp MEMPALACE_REMOTE_TOKEN=t"
# First render writes the entries; the benchmarked runs are the steady state
# every later container start sees.
env $env "$work/devbox-config" render --home "$home" --pi-template "$tmpl" 2>/dev/null
echo "jq $(jq --version); $(go version)"
go run ./bench/procbench -n "$n" -- \
  "jq -s '.[0] * .[1]' $tmpl $home/.pi/agent/settings.json >/dev/null" \
  "env $env $work/devbox-config render --home $home --pi-template $tmpl" \
  "env $env $work/devbox-config render --home $home --pi-template $tmpl --target pi" \
  "env $env true"
