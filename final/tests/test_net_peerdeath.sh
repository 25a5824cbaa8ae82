#!/usr/bin/env bash
# A peer killed mid-collective across (posed) hosts: final/tests/peerdeath/net_peerdeath.c under
# `mpirun --enable-recovery -np 3`, which lets the survivors run on when one rank dies (a plain mpirun ends
# the whole job); the ranks exit without MPI_Finalize (its fence with the dead rank may never end), which
# orte_allowed_exit_without_sync lets them. The program's own harness lines say what it checked; this case
# passes when rank 0's line for it is a PASS, and is skipped where the program skips (no
# MPI_THREAD_MULTIPLE under TSan).
. "$(dirname "$0")/../../common/tests/shtest_lib.sh"

shtest_bench_setup final/net_peerdeath

# peer_killed: the posed hosts of one machine; the survivors see the death (by pid), abort, and leave
# nothing behind.
peer_killed() {
  need_bench
  run_recovery 3 peerKilledMidAllReduce
}

# peer_killed_no_pid: as if every rank were on a machine of its own: each in a pid namespace of its own
# (`unshare --pid --fork`, under a shell so that the program is not the namespace's init, which a
# SIGKILL from inside cannot end) and MPI over TCP only (Open MPI's shared-memory path crashes across
# pid namespaces). No rank can look a peer up by pid, and Open MPI without ULFM reports nothing, so the
# death must come through the bootstrap's watch connections (mcclBootstrapPeerGone). With
# PEERDEATH_DETECT_ONLY the victim dies once its allreduce is done (no MPI message of the harness can
# still be in flight), and each survivor prints what it saw and leaves (after a death Open MPI's TCP
# path may spin for ever inside an MPI call, so the abort is the first case's to test).
peer_killed_no_pid() {
  need_bench
  unshare --pid --fork --mount-proc true 2>/dev/null || shtest_skip "unshare --pid is not permitted here"
  # shellcheck disable=SC2086,SC2016 # MPIRUN_FLAGS is a list of flags; $0 is the shell's, not ours
  timeout 120 $MPIRUN $MPIRUN_FLAGS --mca btl tcp,self -x PEERDEATH_DETECT_ONLY=1 --enable-recovery \
    --mca orte_allowed_exit_without_sync 1 -np 3 unshare --pid --fork --mount-proc sh -c '"$0"; exit $?' "$bench" \
    >"$work/run.log" 2>&1
  local rc=$?
  grep '^# rank' "$work/run.log"
  grep -qE '^SKIP .*peerKilledMidAllReduce' "$work/run.log" &&
    shtest_skip "$(grep -E '^SKIP' "$work/run.log" | head -n 1)"
  local r
  for r in 0 1; do
    grep -qE "^# rank $r: DETECTED mcclRemoteError" "$work/run.log" ||
      shtest_fail "rank $r did not see the death (mpirun exit $rc): $(grep -E "^# rank $r|FAIL" "$work/run.log" | tr '\n' ' ')"
  done
}

shtest_case peerKilledMidAllReduce peer_killed
shtest_case peerKilledNoPidCheck peer_killed_no_pid
shtest_main "$@"
