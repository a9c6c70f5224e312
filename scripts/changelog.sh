#!/usr/bin/env bash
# antsibull-changelog for harvester.upgrade (changelogs/config.yaml, changelogs/fragments/).
#
#   bash scripts/changelog.sh lint            check the fragments and changelog.yaml (default)
#   bash scripts/changelog.sh release [opts]  release galaxy.yml's version: fold the fragments and
#                                             the new modules/plugins into changelogs/changelog.yaml,
#                                             write CHANGELOG.rst, delete the used fragments
#   bash scripts/changelog.sh check           like release, in a scratch copy: fails if it would fail
#
# `release` needs the collection at ansible_collections/harvester/upgrade to list new modules
# and plugins (it asks ansible-doc), so it runs in a real copy (scripts/collection_tree.py) and
# brings changelogs/changelog.yaml, CHANGELOG.rst and the consumed fragments back.
# Add a fragment per change: changelogs/fragments/<short-name>.yaml with keys from
# changelogs/config.yaml sections (minor_changes, bugfixes, ...), each a list of
# "<module or area> - <what changed>." lines.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${VENV_BIN:-$ROOT/.venv/bin}"
export PATH="$BIN:$PATH"
cmd="${1:-lint}"
[[ $# -gt 0 ]] && shift

case "$cmd" in
  lint)
    cd "$ROOT"
    exec "$BIN/antsibull-changelog" lint "$@"
    ;;
  release|check)
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/harvester-upgrade-changelog.XXXXXX")"
    trap 'rm -rf "$WORK"' EXIT
    TREE="$("$BIN/python" "$ROOT/scripts/collection_tree.py" "$WORK")"
    cp "$ROOT/galaxy.yml" "$TREE/galaxy.yml"   # the tarball has MANIFEST.json instead
    (cd "$TREE" && ANSIBLE_COLLECTIONS_PATH="$WORK" "$BIN/antsibull-changelog" release "$@")
    (cd "$TREE" && "$BIN/antsibull-changelog" lint)
    if [[ "$cmd" == release ]]; then
      cp "$TREE/changelogs/changelog.yaml" "$ROOT/changelogs/changelog.yaml"
      cp "$TREE/CHANGELOG.rst" "$ROOT/CHANGELOG.rst"
      for f in "$ROOT"/changelogs/fragments/*; do
        [[ -e "$f" ]] || continue
        [[ -e "$TREE/changelogs/fragments/$(basename "$f")" ]] || rm -v "$f"
      done
      echo "CHANGELOG.rst and changelogs/changelog.yaml updated" >&2
    else
      echo "release would succeed; CHANGELOG.rst preview:" >&2
      sed -n '1,40p' "$TREE/CHANGELOG.rst" >&2
    fi
    ;;
  *)
    echo "usage: $0 [lint|release|check] [antsibull-changelog options]" >&2
    exit 2
    ;;
esac
