#!/usr/bin/env bash
# Run a command with no network except loopback, in a network namespace of its own, where this
# machine allows one (root, or user namespaces); elsewhere it runs as it is, and says so.
#   bash scripts/offline.sh mkdocs build --strict
set -euo pipefail
if [ "${NBAGENT_OFFLINE_INNER:-}" = 1 ]; then
  unset NBAGENT_OFFLINE_INNER
  ip link set lo up
  exec "$@"
fi
if command -v unshare >/dev/null && command -v ip >/dev/null; then
  for flags in -n -rn; do
    if unshare $flags true 2>/dev/null; then
      NBAGENT_OFFLINE_INNER=1 exec unshare $flags bash "$0" "$@"
    fi
  done
fi
echo "(no network namespace on this machine: '$1' runs with the network)" >&2
exec "$@"
