#!/usr/bin/env bash
# render's no-change start (every container start after the first) beside a
# static hello-world Go binary, both built as releases are
# (CGO_ENABLED=0 -trimpath -s -w), plus the cgo build for comparison.
# Commands are started directly (no shell) and alternate run by run; see
# BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$work/devbox-config" ./cmd/devbox-config
CGO_ENABLED=1 go build -trimpath -ldflags='-s -w' -o "$work/devbox-config-cgo" ./cmd/devbox-config
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$work/hello" ./bench/hello
# render alone, then render plus each group of the edge's and gateway's
# dependencies (bench/startcost)
for tags in none nethttp sqlite gosdk nethttp,sqlite,gosdk; do
  CGO_ENABLED=0 go build -tags "$tags" -trimpath -ldflags='-s -w' -o "$work/render-$tags" ./bench/startcost
done
home=$work/home
mkdir -p "$home/.config/opencode" "$home/.pi/agent"
cp testdata/bench/opencode.jsonc "$home/.config/opencode/"
cp testdata/bench/pi-settings.json "$home/.pi/agent/settings.json"
printf '{\n  "mcpServers": {}\n}\n' > "$home/.pi/agent/mcp.json"
export MEMPALACE_REMOTE_URL=https://palace.example.org/mcp MEMPALACE_REMOTE_TOKEN=t
"$work/devbox-config" render --home "$home" 2>/dev/null
echo
echo "$(go version); inits before main (GODEBUG=inittrace=1, last init's start + clock):"
GODEBUG=inittrace=1 "$work/devbox-config" render --home "$home" 2>&1 >/dev/null | awk '/^init /{t=$3; sub("@","",t); c=$5; k++; if (t+c>m) m=t+c; s+=c} END {printf "  %d inits, %.2f ms clock in inits, last done at %.2f ms\n", k, s, m}'
go run ./bench/procbench -exec -n "$n" -- \
  "$work/hello" \
  "$work/devbox-config render --home $home" \
  "$work/render-none --home $home" \
  "$work/render-nethttp --home $home" \
  "$work/render-sqlite --home $home" \
  "$work/render-gosdk --home $home" \
  "$work/render-nethttp,sqlite,gosdk --home $home" \
  "$work/devbox-config-cgo render --home $home" \
  "$work/devbox-config version"
ls -l "$work" | awk 'NR>1 && $1 ~ /^-/ {printf "  %-32s %5.1f MB\n", $9, $5/1e6}'
