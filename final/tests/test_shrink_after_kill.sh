#!/usr/bin/env bash
# Recovery after a rank's death: final/tests/peerdeath/shrink_after_kill.c under `mpirun --enable-recovery
# -np 4` (a plain mpirun ends the whole job when one rank dies); the ranks exit without MPI_Finalize, which
# orte_allowed_exit_without_sync lets them. The last rank kills itself mid-allreduce; the survivors see
# mcclRemoteError, revoke, shrink to 3 ranks and finish the loop there, checked. The case passes when rank
# 0's harness line is a PASS.
. "$(dirname "$0")/../../common/tests/shtest_lib.sh"

shtest_bench_setup final/shrink_after_kill

shrink_after_kill() {
  need_bench
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 300 $MPIRUN $MPIRUN_FLAGS --enable-recovery --mca orte_allowed_exit_without_sync 1 -np 4 "$bench" \
    >"$work/run.log" 2>&1
  local rc=$? line
  line=$(grep -E '^(PASS|FAIL|SKIP) .*shrinkAfterKill' "$work/run.log" | head -n 1)
  grep '^# rank' "$work/run.log"
  case "$line" in
    PASS*) return 0 ;;
    SKIP*) line=${line#SKIP * (} && shtest_skip "${line%)}" ;;
    FAIL*) shtest_fail "${line#FAIL }" ;;
    *) shtest_fail "no result line (mpirun exit $rc): $(tail -n 5 "$work/run.log" | tr '\n' ' ')" ;;
  esac
}

shtest_case shrinkAfterKill shrink_after_kill
shtest_main "$@"
