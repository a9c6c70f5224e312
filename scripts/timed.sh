#!/usr/bin/env bash
# Run a command and say how long it took: `bash scripts/timed.sh NAME CMD [ARGS...]`
# prints "== NAME: passed in N s" (or FAILED, with the command's exit status, which it keeps).
# Used by `make lint` so each gate's duration is in the log (docs/quality-gates.md).
set -uo pipefail
name="$1"; shift
start=$SECONDS
echo "== $name: $*"
"$@"
rc=$?
if [[ $rc -eq 0 ]]; then
  echo "== $name: passed in $((SECONDS - start)) s"
else
  echo "== $name: FAILED (exit $rc) after $((SECONDS - start)) s"
fi
exit $rc
