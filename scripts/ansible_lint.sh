#!/usr/bin/env bash
# ansible-lint (profile production, .ansible-lint) on the collection's roles, playbooks,
# AWX configuration and molecule scenarios. Offline: the collections it needs
# (kubernetes.core, awx.awx) come with the venv's `ansible` package and harvester.upgrade
# itself is found through ansible_collections/harvester/upgrade (ansible.cfg).
#   scripts/ansible_lint.sh [paths...]      (default: everything .ansible-lint does not exclude)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${VENV_BIN:-$ROOT/.venv/bin}"
cd "$ROOT"
export PATH="$BIN:$PATH" ANSIBLE_CONFIG="$ROOT/ansible.cfg"
if [[ ! -e ansible_collections/harvester/upgrade ]]; then
  mkdir -p ansible_collections/harvester && ln -sfn ../.. ansible_collections/harvester/upgrade
fi
exec "$BIN/ansible-lint" --nocolor -c "$ROOT/.ansible-lint" "$@"
