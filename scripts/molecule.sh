#!/usr/bin/env bash
# molecule test for the roles, each scenario against its own simulated cluster
# (molecule/shared/create.yml starts `harvester-sim serve --scenario three-node --speed 1000`,
# destroy.yml stops it). Default driver, no containers.
#   bash scripts/molecule.sh [scenario...]      (default: every molecule/*/molecule.yml)
# HARVESTER_SIM_SCENARIO / HARVESTER_SIM_SPEED change the simulated cluster.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${VENV_BIN:-$ROOT/.venv/bin}"
cd "$ROOT"
export PATH="$BIN:$PATH" ANSIBLE_CONFIG="$ROOT/ansible.cfg" ANSIBLE_NOCOLOR=1 PY_COLORS=0
if [[ ! -e ansible_collections/harvester/upgrade ]]; then
  mkdir -p ansible_collections/harvester && ln -sfn ../.. ansible_collections/harvester/upgrade
fi
scenarios=("$@")
if [[ ${#scenarios[@]} -eq 0 ]]; then
  for f in molecule/*/molecule.yml; do scenarios+=("$(basename "$(dirname "$f")")"); done
fi
rc=0
for s in "${scenarios[@]}"; do
  start=$SECONDS
  if "$BIN/molecule" test -s "$s"; then
    echo "molecule $s: passed in $((SECONDS - start)) s"
  else
    echo "molecule $s: FAILED after $((SECONDS - start)) s"; rc=1
  fi
done
exit $rc
