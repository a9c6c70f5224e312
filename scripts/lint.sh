#!/usr/bin/env bash
# `make lint`: every quality gate `make test` does not run, one after the other, each timed
# (docs/quality-gates.md). A failing gate does not stop the others; the summary at the end
# lists each gate's result and duration, and the exit status is non-zero if any failed.
#   bash scripts/lint.sh [gate...]    gates: ruff mypy imports ansible-lint changelog sanity
#                                     sanity-oldest upgrade-oldest importer molecule
# sanity and the rest run on the newest supported ansible-core (the project venv);
# sanity-oldest and upgrade-oldest on the oldest (OLDEST_BIN, made by `make venv-oldest`):
# ansible-test sanity, and `make upgrade` with that ansible-playbook (docs/support-matrix.md).
# Offline except for the first ansible-test sanity on a machine (it fills its virtualenvs
# from the package index; scripts/sanity.sh).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${VENV_BIN:-$ROOT/.venv/bin}"
cd "$ROOT"
export PATH="$BIN:$PATH"
OLDEST_BIN="${OLDEST_BIN:-}"
gates=("$@")
[[ ${#gates[@]} -eq 0 ]] && gates=(ruff mypy imports ansible-lint changelog sanity sanity-oldest
                                   upgrade-oldest importer molecule)

need_oldest() {
  [[ -n "$OLDEST_BIN" && -x "$OLDEST_BIN/ansible-test" ]] && return 0
  echo "no oldest ansible-core venv (OLDEST_BIN=$OLDEST_BIN): run through make lint" >&2
  return 1
}

run_gate() {
  case "$1" in
    ruff) "$BIN/ruff" check . ;;
    mypy) "$BIN/python" scripts/mypy_gate.py ;;
    imports) "$BIN/python" scripts/import_layers.py ;;
    ansible-lint) bash scripts/ansible_lint.sh ;;
    changelog) bash scripts/changelog.sh lint ;;
    sanity) bash scripts/sanity.sh ;;
    sanity-oldest) need_oldest && ANSIBLE_TEST_BIN="$OLDEST_BIN" bash scripts/sanity.sh ;;
    upgrade-oldest) need_oldest && "$BIN/python" scripts/upgrade_on_simulator.py \
                      --out out/oldest-ansible --ansible-bin "$OLDEST_BIN" ;;
    importer) bash scripts/galaxy_importer.sh ;;
    molecule) bash scripts/molecule.sh ;;
    *) echo "unknown gate $1" >&2; return 2 ;;
  esac
}

summary=()
rc=0
total=$SECONDS
for gate in "${gates[@]}"; do
  echo "== $gate"
  start=$SECONDS
  if run_gate "$gate"; then
    summary+=("$(printf '%-13s passed  %5d s' "$gate" $((SECONDS - start)))")
  else
    summary+=("$(printf '%-13s FAILED  %5d s' "$gate" $((SECONDS - start)))"); rc=1
  fi
done
echo
echo "== make lint summary"
printf '%s\n' "${summary[@]}"
printf '%-13s %s  %5d s\n' total "$([[ $rc -eq 0 ]] && echo passed || echo FAILED)" $((SECONDS - total))
exit $rc
