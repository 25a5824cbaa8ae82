#!/usr/bin/env bash
# make format-check: the C sources follow .clang-format.
#   1. No line of a tracked .c/.h file is longer than the ColumnLimit (120), anywhere.
#   2. The lines changed since FORMAT_BASE (default: the merge base with branch main, when HEAD is
#      not main itself) are as clang-format would write them (git clang-format --diff).
# The repository predates the check, so it is not reformatted as a whole: new code is held to it.
set -uo pipefail
cd "$(dirname "$0")/.."
limit=$(awk '/^ColumnLimit:/{print $2}' .clang-format)
rc=0
long=$(git ls-files '*.c' '*.h' | xargs awk -v n="$limit" 'length > n {printf "%s:%d: %d columns\n", FILENAME, FNR, length}')
if [ -n "$long" ]; then echo "$long"; echo "format-check: lines over $limit columns (above)" >&2; rc=1; fi
base=${FORMAT_BASE:-}
if [ -z "$base" ] && git rev-parse -q --verify main >/dev/null && [ "$(git rev-parse HEAD)" != "$(git rev-parse main)" ]; then
  base=$(git merge-base HEAD main)
fi
if [ -n "$base" ]; then
  out=$(git clang-format --diff --extensions c,h "$base" -- 2>&1)
  case "$out" in
    "" | *"no modified files to format"* | *"did not modify any files"*) ;;
    *) echo "$out"; echo "format-check: clang-format would change lines changed since $base (above;" \
         "'git clang-format $base' applies it)" >&2; rc=1 ;;
  esac
fi
[ "$rc" -eq 0 ] && echo "format-check: no line over $limit columns${base:+; lines changed since ${base:0:12} are clang-format clean}"
exit $rc
