#!/usr/bin/env bash
# ansible-builder create: the execution environment's build context, without a container
# engine. Builds the collection tarball execution-environment.yml installs (build/), then
# writes CONTEXT (default: build/ee-context/) with its Containerfile. Build the image with
#   podman build -f build/ee-context/Containerfile -t harvester-upgrade-ee:<version> build/ee-context
#   bash scripts/ee_context.sh [CONTEXT]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${VENV_BIN:-$ROOT/.venv/bin}"
CONTEXT="${1:-$ROOT/build/ee-context}"
export PATH="$BIN:$PATH"
cd "$ROOT"
version="$("$BIN/python" -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')"
grep -q "harvester-upgrade-${version}.tar.gz" execution-environment.yml || {
  echo "execution-environment.yml does not install harvester-upgrade-${version}.tar.gz" >&2
  exit 1
}
mkdir -p build
"$BIN/ansible-galaxy" collection build --force --output-path build . >/dev/null
"$BIN/ansible-builder" create -f execution-environment.yml -c "$CONTEXT" --output-filename Containerfile
echo "build context: $CONTEXT (Containerfile, _build/)"
