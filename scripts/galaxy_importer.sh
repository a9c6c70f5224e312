#!/usr/bin/env bash
# galaxy-importer on the built collection tarball, offline (no Galaxy server, no container
# engine): tests/galaxy-importer.cfg turns ansible-test off (scripts/sanity.sh covers it) and
# keeps ansible-doc and ansible-lint on. Fails when the importer fails or logs an ERROR;
# WARNING lines are printed (STRICT=1 makes them fail too).
#   bash scripts/galaxy_importer.sh [tarball]       (default: build one now)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${VENV_BIN:-$ROOT/.venv/bin}"
export PATH="$BIN:$PATH"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/harvester-upgrade-importer.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
TARBALL="${1:-}"
if [[ -z "$TARBALL" ]]; then
  "$BIN/ansible-galaxy" collection build --force --output-path "$WORK" "$ROOT" >/dev/null
  TARBALL="$(ls "$WORK"/harvester-upgrade-*.tar.gz)"
fi
export GALAXY_IMPORTER_CONFIG="$ROOT/tests/galaxy-importer.cfg"
export GALAXY_IMPORTER_ANSIBLE_LOCAL_TMP="$WORK/ansible-tmp"
export GALAXY_IMPORTER_TMP_ROOT_DIR="$WORK"
mkdir -p "$WORK/ansible-tmp"
set +e
# (it writes importer_result.json into the working directory)
cd "$WORK"
"$BIN/python" -m galaxy_importer.main --print-result "$TARBALL" > "$WORK/importer.log" 2>&1
rc=$?
set -e
# The result JSON is large (docs of every plugin); show the log lines only.
grep -E '^(WARNING|ERROR|Traceback)' "$WORK/importer.log" || true
errors="$(grep -cE '^ERROR' "$WORK/importer.log" || true)"
warnings="$(grep -cE '^WARNING' "$WORK/importer.log" || true)"
echo "galaxy-importer: exit $rc, $errors error(s), $warnings warning(s)"
if [[ $rc -ne 0 || $errors -ne 0 ]]; then exit 1; fi
if [[ "${STRICT:-0}" == 1 && $warnings -ne 0 ]]; then exit 1; fi
