#!/usr/bin/env bash
# A peer killed mid-collective across (posed) hosts: final/tests/peerdeath/net_peerdeath.c under
# `mpirun --enable-recovery -np 3`, which lets the survivors run on when one rank dies (a plain mpirun ends
# the whole job); the ranks exit without MPI_Finalize (its fence with the dead rank may never end), which
# orte_allowed_exit_without_sync lets them. The program's own harness lines say what it checked; this case
# passes when rank 0's line for it is a PASS, and is skipped where the program skips (no
# MPI_THREAD_MULTIPLE under TSan).
. "$(dirname "$0")/../../common/tests/shtest_lib.sh"

shtest_bench_setup final/net_peerdeath

peer_killed() {
  need_bench
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 180 $MPIRUN $MPIRUN_FLAGS --enable-recovery --mca orte_allowed_exit_without_sync 1 -np 3 "$bench" >"$work/run.log" 2>&1
  local rc=$? line
  line=$(grep -E '^(PASS|FAIL|SKIP) .*peerKilledMidAllReduce' "$work/run.log" | head -n 1)
  grep '^# rank' "$work/run.log"
  case "$line" in
    PASS*) return 0 ;;
    SKIP*) line=${line#SKIP * (} && shtest_skip "${line%)}" ;;
    FAIL*) shtest_fail "${line#FAIL }" ;;
    *) shtest_fail "no result line (mpirun exit $rc): $(tail -n 5 "$work/run.log" | tr '\n' ' ')" ;;
  esac
}

shtest_case peerKilledMidAllReduce peer_killed
shtest_main "$@"
