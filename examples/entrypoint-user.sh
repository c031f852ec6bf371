#!/usr/bin/env bash
# Excerpt for a devbox image's entrypoint-user.sh (runs as the container user
# at every start). devbox-config makes the harness configs follow .env and
# never fails the start: problems are warnings on stderr, exit status 0.
#
# opencode-devbox: replaces the mempalace branch of generate-config.py.
# pi-devbox: replaces the jq settings merge (PI_SETTINGS_MERGE=0 still turns
# it off) and keeps ~/.pi/agent/mcp.json's mempalace entry in step.
if command -v devbox-config >/dev/null 2>&1; then
  devbox-config render || echo "devbox-config render failed (exit $?); configs left as they were" >&2
fi
