#!/usr/bin/env bash
# final/examples/mpi_shrink_demo under `mpirun --enable-recovery -np 4`, as its header says to run it: rank 3
# kills itself mid-allreduce; each of the 3 survivors reports the remote error naming rank 3, revokes, shrinks
# to 3 ranks and finishes the loop there, checked ("[7] rank r: finished"), and the job ends within the limit.
. "$(dirname "$0")/../../common/tests/shtest_lib.sh"

shtest_bench_setup final/mpi_shrink_demo

shrink_demo() {
  need_bench
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 300 $MPIRUN $MPIRUN_FLAGS --enable-recovery --mca orte_allowed_exit_without_sync 1 -np 4 "$bench" \
    >"$work/run.log" 2>&1
  grep -E '^\[[0-9]\]' "$work/run.log"
  local r
  for r in 0 1 2; do
    grep -qE "^\[4\] rank $r: .*remote process exited.*peer rank 3 \(pid [0-9]+\) has exited" "$work/run.log" ||
      shtest_fail "rank $r did not report rank 3's death: $(shtest_tail 5 "$work/run.log")"
    grep -qE "^\[5\] rank $r: revoked and shrunk .*: rank $r of 3 " "$work/run.log" ||
      shtest_fail "rank $r did not shrink to rank $r of 3: $(shtest_tail 5 "$work/run.log")"
    grep -qE "^\[7\] rank $r: finished" "$work/run.log" ||
      shtest_fail "rank $r did not finish: $(shtest_tail 5 "$work/run.log")"
  done
  [ "$(grep -c 'checked$' "$work/run.log")" = 6 ] || shtest_fail "not every allreduce was checked: $(shtest_tail 5 "$work/run.log")"
  ! grep -q WRONG "$work/run.log" || shtest_fail "a wrong result: $(grep WRONG "$work/run.log" | head -n 1)"
}

shtest_case shrinkDemo shrink_demo
shtest_main "$@"
