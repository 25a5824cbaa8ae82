#!/usr/bin/env bash
# Runs a lab's lab.gdb in batch mode against its demo and checks that every breakpoint was hit.
# lab.gdb is written for people (it stops at each breakpoint); with $mccl_autorun = 1 each
# breakpoint's commands end in `continue`, so the same script runs unattended here:
#     break mcclCuMemAlloc
#     commands
#       print size
#       if $mccl_autorun
#         continue
#       end
#     end
# A second run checks the README: at the first stop of each breakpoint of its gdb table it runs
# every `command` of the "then try" column, as a reader would (mk/gdbhints.py), and fails when one
# errors, when a breakpoint's hints never ran, when the stops come in another order than the
# table's rows (unless lab.gdb says "# gdbcheck: stop order varies"), or when the run does not end
# by itself with every process exited.
# Usage: gdbcheck.sh LAB_DIR DEMO_BIN   (runs LAB_DIR/lab.gdb, then its README's hints)
#        gdbcheck.sh SCRIPT.gdb BIN     (a script that sets its own args, e.g. sim/tests/kernel.gdb;
#                                        no README pass)
set -u
dir=$1 bin=$2
script=$dir/lab.gdb
[ -f "$dir" ] && script=$dir
name="gdb.$(basename "$dir" .gdb)"
if [ "${BACKEND:-sim}" != sim ]; then echo "SKIP $name (lab.gdb is checked on the sim backend)"; exit 0; fi
if ! command -v gdb >/dev/null; then echo "SKIP $name (gdb not installed: make deps)"; exit 0; fi
# A sanitizer build's walk would step through the same demo as the plain build's (which CI runs first),
# only slower, and its binaries keep line tables only (-g1), without the locals a walk prints.
if [ "${MCCL_SANITIZED:-0}" = 1 ]; then
  echo "SKIP $name (lab.gdb is checked in the plain build: sanitizer builds keep line tables only)"; exit 0
fi
if [ ! -x "$bin" ]; then echo "FAIL $name (no demo binary $bin)"; exit 1; fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
timeout -k 5 300 gdb -q -batch -nx -ex 'set $mccl_autorun = 1' -ex 'set pagination off' -ex 'set confirm off' \
  -ex 'set breakpoint pending on' \
  -x "$script" -ex 'info breakpoints' --args "$bin" >"$log" 2>&1
rc=$?
# Breakpoint rows of `info breakpoints`: "<num> breakpoint keep y <addr> in <fn> at file:line"
total=$(awk '/^Num +Type/{t=1;next} t && $2=="breakpoint"{n++} END{print n+0}' "$log")
unhit=$(awk '/^Num +Type/{t=1;next} t && $2=="breakpoint"{id=$1; ids[++n]=id; next} t && /breakpoint already hit/{hit[id]=1} END{for(i=1;i<=n;i++) if(!hit[ids[i]]) printf "%s ", ids[i]}' "$log")
if [ "$total" -eq 0 ]; then
  echo "FAIL $name (no breakpoints listed; gdb exit $rc)"; tail -20 "$log" | sed 's/^/#   /'; exit 1
fi
# A breakpoint gdb could not set silently disappears in batch mode: compare with the script.
wanted=$(grep -cE '^[[:space:]]*(break|b|tbreak|rbreak)[[:space:]]' "$script")
if [ "$total" -ne "$wanted" ]; then
  echo "FAIL $name (lab.gdb asks for $wanted breakpoints, gdb set $total)"; grep -iE 'not defined|no symbol|error' "$log" | head -5 | sed 's/^/#   /'; exit 1
fi
if [ -n "$unhit" ]; then
  # An exercise stub of a learner tree (docs/exercises.md) ends the demo early: name it.
  echo "FAIL $name (breakpoints never hit: ${unhit% } of $total)"; grep -m3 'MCCL EXERCISE' "$log" | sed 's/^/#   /'
  tail -30 "$log" | sed 's/^/#   /'; exit 1
fi
# Second run: the README's hints, by hand (no autorun), with the timeouts kept so a hang fails.
if [ -f "$dir" ]; then
  echo "PASS $name ($total breakpoints, all hit)"
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
MCCL_GDB_README="$dir/README.md" timeout -k 5 300 gdb -q -batch -nx -ex 'set $mccl_autorun = 0' \
  -x "$dir/lab.gdb" -x "$here/gdbhints.py" --args "$bin" >"$log" 2>&1
rc=$?
bad=$(grep -E '^MCCL-(HINT-FAIL|HINT-UNRUN)' "$log")
if ! grep -q '^MCCL-HINTS-DONE' "$log"; then
  echo "FAIL $name (README hints: the run did not end by itself; gdb exit $rc)"; tail -20 "$log" | sed 's/^/#   /'; exit 1
fi
if [ -n "$bad" ]; then
  echo "FAIL $name (a README gdb hint fails as written)"; echo "$bad" | sed 's/^/#   /'; exit 1
fi
order="in table order"
if grep -q '^# gdbcheck: stop order varies' "$dir/lab.gdb"; then order="stop order not checked: it varies"
elif grep -q '^MCCL-ORDER-WRONG' "$log"; then
  echo "FAIL $name (README gdb table not in the order of the stops)"; grep -E '^MCCL-(ORDER|TABLE) ' "$log" | sed 's/^/#   /'
  exit 1
fi
nhints=$(sed -n 's/^MCCL-HINTS-DONE //p' "$log")
echo "PASS $name ($total breakpoints, all hit; $nhints README hint commands ran; $order)"
