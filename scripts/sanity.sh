#!/usr/bin/env bash
# ansible-test sanity on the collection, without containers and without network access
# other than the package index.
#
#   scripts/sanity.sh [ansible-test sanity options...]   e.g. --test pep8, --list-tests
#
# - The collection is laid out as a real copy of the built tarball in a temporary
#   directory outside the git work tree (scripts/collection_tree.py); ansible-test would
#   otherwise only see files tracked by git.
# - `--local --python 3.11`: runs with the venv's interpreter; ansible-test still creates
#   one small virtualenv per sanity test (cached in ~/.ansible/test/venv, pins from
#   ansible-test itself, installed from the package index the first time; durations in
#   docs/quality-gates.md).
# - ansible-test bootstraps pip in those virtualenvs with a script it downloads from a host
#   that is not a package index; scripts/ansible_test_get_pip.py stands in for it.
# - ANSIBLE_TEST_BIN=DIR runs the ansible-test of another ansible-core (the oldest supported
#   one: `make venv-oldest`, gate `sanity-oldest` of scripts/lint.sh); the tree is still laid
#   out with the project venv, whose `ansible` package carries kubernetes.core.
# Exit status is ansible-test's. Keep the tree with KEEP_TREE=1 (path printed).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TREE_BIN="${VENV_BIN:-$ROOT/.venv/bin}"
BIN="${ANSIBLE_TEST_BIN:-$TREE_BIN}"
PY_VERSION="$("$BIN/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

# The pip version ansible-test bootstraps (its cache file name carries it).
PIP_VERSION="$("$BIN/python" -c '
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
print(get_venv_packages(NativePythonConfig(version="'"$PY_VERSION"'"))["pip"])')"
CACHE="$HOME/.ansible/test/cache"
mkdir -p "$CACHE"
cp "$ROOT/scripts/ansible_test_get_pip.py" "$CACHE/get_pip_${PIP_VERSION//./_}.py"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/harvester-upgrade-sanity.XXXXXX")"
if [[ "${KEEP_TREE:-0}" != 1 ]]; then trap 'rm -rf "$WORK"' EXIT; fi
TREE="$("$TREE_BIN/python" "$ROOT/scripts/collection_tree.py" "$WORK")"
echo "collection tree: $TREE" >&2
cd "$TREE"
export PATH="$BIN:$PATH"
"$BIN/ansible-test" sanity --local --python "$PY_VERSION" --color no "$@"
