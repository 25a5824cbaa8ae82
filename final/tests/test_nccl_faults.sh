#!/usr/bin/env bash
# The faults of final/tests/nccl/nccl_faults.c (a program written against nccl.h alone) on minccl's
# drop-in, 2 ranks: the three mismatched calls are named on every rank within MCCL_WATCHDOG_TIMEOUT + 1 s
# and abort then ends the stuck kernels; a peer's SIGKILL reaches the survivor's async error. On the GPUs
# mk/gpu-run.sh runs the same binary on NCCL's library too (MCCL_FAULTS=1).
. "$(dirname "$0")/../../common/tests/shtest_lib.sh"

shtest_bench_setup final/nccl_faults
libdir=$(cd "$(dirname "$bench")/../../lib" 2>/dev/null && pwd)

# faults CASE MPIRUN_ARGS...: the case on 2 ranks of the drop-in, its log in $work/CASE.log.
faults() {
  local c=$1
  shift
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" MCCL_WATCHDOG_TIMEOUT=1000 timeout 120 \
    $MPIRUN $MPIRUN_FLAGS -x LD_LIBRARY_PATH -x MCCL_WATCHDOG_TIMEOUT "$@" -np 2 "$bench" "$c" 5000 \
    >"$work/$c.log" 2>&1
}

# need_line RANK CASE PATTERN MAX_MS: RANK's report for CASE matches PATTERN, with a time of at most MAX_MS.
need_line() {
  local line ms
  line=$(grep -E "^# rank $1: minccl $2: " "$work/$2.log" | grep -v ncclCommAbort | head -n 1)
  [ -n "$line" ] || shtest_fail "rank $1 printed no report for $2: $(shtest_tail 5 "$work/$2.log")"
  grep -qE "$3" <<<"$line" || shtest_fail "rank $1's report for $2 lacks /$3/: $line"
  ms=$(sed -nE 's/.* ([0-9.]+) ms after .*/\1/p' <<<"$line")
  [ -n "$ms" ] && awk -v m="$ms" -v x="$4" 'BEGIN { exit !(m <= x) }' ||
    shtest_fail "rank $1's report for $2 came after ${ms:-no} ms, more than $4: $line"
  grep -qE "^# rank $1: minccl $2: ncclCommAbort no error" "$work/$2.log" ||
    shtest_fail "rank $1's abort after $2: $(grep -E "^# rank $1: .*ncclCommAbort" "$work/$2.log")"
}

mismatch() {
  need_bench
  faults "$1" || shtest_fail "mpirun exit $?: $(shtest_tail 5 "$work/$1.log")"
  grep '^# rank' "$work/$1.log"
  need_line 0 "$1" "$2" 2000
  need_line 1 "$1" "$3" 2000
}

peer_killed() {
  need_bench
  faults kill --enable-recovery --mca orte_allowed_exit_without_sync 1
  grep '^# rank' "$work/kill.log"
  # 100 ms is the bound on a GPU; a loaded two-core machine running the sim gets a second.
  need_line 0 kill "remote process exited" 1000
}

shtest_case faultsCountDiffers mismatch count "invalid usage.*count differs" "invalid usage.*count differs"
shtest_case faultsFunctionDiffers mismatch function "invalid usage.*function differs" "invalid usage.*function differs"
shtest_case faultsNeverCalled mismatch missing "remote process.*rank 1 has not called op #2" "remote process.*rank 1 has not called op #2"
shtest_case faultsPeerKilled peer_killed
shtest_main "$@"
