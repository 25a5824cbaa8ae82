#!/usr/bin/env bash
# make demo's build: the compiler's lines go to a log, the terminal gets one line per module as its first
# file compiles, and the log's tail if the build fails. V=1 (or MCCL_VERBOSE=1) shows every line instead.
#   quietbuild.sh LOG MAKE-COMMAND...
set -uo pipefail
log=$1
shift
if [ "${V:-}" = 1 ] || [ "${MCCL_VERBOSE:-}" = 1 ]; then exec "$@"; fi
mkdir -p "$(dirname "$log")"
start=$SECONDS
echo "Building every lab (about 3 minutes on 2 cores the first time, seconds after that); compiler output: $log"
# A module is named by the first path of one of its sources on a compile line.
"$@" >"$log" 2>&1 &
pid=$!
tail -n +1 --pid="$pid" -f "$log" 2>/dev/null |
  grep --line-buffered -oE ' (common|sim|final|labs/[0-9]{2}_[a-z_]+)/' | awk '{ m = $1; sub(/\/$/, "", m) } !seen[m]++ { print "  building " m; fflush() }'
wait "$pid"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "Build failed (exit $rc); the last lines of $log:"
  tail -n 30 "$log"
  exit "$rc"
fi
echo "Built in $((SECONDS - start)) s."
