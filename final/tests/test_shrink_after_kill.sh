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
  run_recovery 4 shrinkAfterKill
}

shtest_case shrinkAfterKill shrink_after_kill
shtest_main "$@"
