#!/usr/bin/env bash
# render's full no-change start (what every container start after the
# first runs) beside a static hello-world Go binary and the jq merge it
# replaces (pi-devbox's entrypoint: jq -s '.[0] * .[1]' template settings),
# on the same files: testdata/bench's 215-line opencode.jsonc with comments,
# a 31-line pi settings.json, pi's mcp.json, in remote mode, every entry
# already right. Every binary is built as releases are (CGO_ENABLED=0
# -trimpath -s -w); commands are started directly (procbench -exec: no
# shell, no env wrapper) and alternate run by run. bench/startcost rows:
# render alone, then with the edge's and gateway's dependencies linked.
# See BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build() { CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' "$@"; }
build -o "$work/devbox-config" ./cmd/devbox-config
build -o "$work/hello" ./bench/hello
build -o "$work/render-alone" ./bench/startcost
build -tags nethttp,sqlite,gosdk -o "$work/render-alldeps" ./bench/startcost
home=$work/home
mkdir -p "$home/.config/opencode" "$home/.pi/agent"
cp testdata/bench/opencode.jsonc "$home/.config/opencode/"
cp testdata/bench/pi-settings.json "$home/.pi/agent/settings.json"
printf '{\n  "mcpServers": {}\n}\n' > "$home/.pi/agent/mcp.json"
# jq merges the template render merges (the embedded one); the filter is a
# file so that no argument holds a space (procbench -exec splits on them)
tmpl=templates/files/pi-settings.json
printf '.[0] * .[1]\n' > "$work/merge.jq"
export MEMPALACE_REMOTE_URL=https://palace.example.org/mcp MEMPALACE_REMOTE_TOKEN=t
# The first start writes the entries; every timed one must change nothing.
"$work/devbox-config" render --home "$home" 2>/dev/null
if [ -n "$("$work/devbox-config" render --home "$home" 2>&1)" ]; then
  echo "render is not in the steady state" >&2
  exit 1
fi
"$work/render-alone" --home "$home" # exits 1 if it writes
echo "$(go version); $(jq --version); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "inits before main (GODEBUG=inittrace=1: count, clock in inits, last one done at):"
for cmd in "devbox-config render --home $home" "render-alone --home $home"; do
  # shellcheck disable=SC2086
  GODEBUG=inittrace=1 "$work"/$cmd 2>&1 >/dev/null |
    awk -v c="${cmd%% --*}" '/^init /{t=$3; sub("@","",t); k++; if (t+$5>m) m=t+$5; s+=$5} END {printf "  %-22s %d inits, %.2f ms, %.2f ms\n", c, k, s, m}'
done
go run ./bench/procbench -exec -n "$n" -- \
  "$work/hello" \
  "jq -s -f $work/merge.jq $tmpl $home/.pi/agent/settings.json" \
  "$work/devbox-config render --home $home" \
  "$work/devbox-config render --home $home --target pi" \
  "$work/devbox-config version" \
  "$work/render-alone --home $home" \
  "$work/render-alldeps --home $home" | sed "s|$work/||g"
ls -l "$work" | awk 'NR>1 && $1 ~ /^-/ && $5 > 100000 {printf "  %-16s %5.1f MB\n", $9, $5/1e6}'
