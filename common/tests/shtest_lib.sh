# Shell tests' harness, sourced by common/tests/test_*.sh and labs/*/tests/test_*.sh: the same output as the C harness
# (mccl_test.h), so mk/runtests.sh counts them alike. A test registers its cases, then calls shtest_main:
#   shtest_case NAME FUNCTION [ARGS...]     # FUNCTION runs in a subshell from the repository root
#   shtest_main "$@"
# In a case: shtest_fail MESSAGE ends it failed, shtest_skip REASON skipped; returning is a pass.
# MCCL_TEST_FILTER (make's T) or argv[1] selects cases by substring or glob of the full name,
# `--list` prints the selected names and runs nothing. shtest_make runs a nested make of this
# same build variant that never runs the shell tests again (MCCL_TEST_NESTED=1).
set -u
shtest_suite="$(basename "$(dirname "$(dirname "$0")")")/$(basename "$0" .sh)"
# The repository root: the nearest directory above the test that holds mk/runtests.sh (common/tests/
# and labs/NN_x/tests/ sit at different depths).
shtest_root=$(d=$(cd "$(dirname "$0")" && pwd); while [ "$d" != / ] && [ ! -f "$d/mk/runtests.sh" ]; do d=$(dirname "$d"); done; echo "$d")
shtest_names=() shtest_cmds=()
shtest_msg=$(mktemp)
trap 'rm -f "$shtest_msg"' EXIT

shtest_case() { shtest_names+=("$1"); shift; shtest_cmds+=("$(printf '%q ' "$@")"); }
shtest_fail() { printf '%s' "$*" >"$shtest_msg"; exit 1; }
shtest_skip() { printf '%s' "$*" >"$shtest_msg"; exit 77; }

shtest_selected() {
  local p=$1
  [ -z "$p" ] && return 0
  case "$p" in *[*?[]*) ;; *) p="*$p*" ;; esac
  [[ $2 == $p ]]
}

shtest_make() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u LAB -u T -u MCCL_TEST_FILTER MCCL_TEST_NESTED=1 make --no-print-directory ${MCCL_MAKE_VARS:-} "$@"
}

# shtest_bench_setup BIN: for a test that runs a benchmark under mpirun (make test gives MPIRUN):
# $bench is BIN under the build's bin directory, $work a directory removed at exit, need_bench fails
# when the binary is missing and skips outside make test. LeakSanitizer is off for those runs, as
# mk/runtests.sh does for MPI programs: Open MPI's allocations outlive MPI_Finalize in components it
# unloads (<unknown module>, beyond mk/lsan.supp); ASan/UBSan errors still fail the run.
shtest_bench_setup() {
  bench=${MCCL_BIN_DIR:-build/sim/bin}/$1
  work=$(mktemp -d)
  trap 'rm -rf "$work" "$shtest_msg"' EXIT
  [ -z "${ASAN_OPTIONS+x}" ] || export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
}
# shtest_tail N FILE: FILE's last N lines that are the program's own, on one line for a failure message. Open
# MPI's notices when a rank aborts (MPI_ABORT's banner, "help message" lines, rules of dashes) come last in any
# order, and would push out the line that says what failed (an exercise stub names itself in it).
shtest_tail() {
  grep -vE '^-+$|MPI_ABORT|mpi-abort|orte_base_help_aggregate|You may or may not see output|exactly when Open MPI kills|with errorcode|help message|^(Primary job|mpirun (noticed|detected)|Process name|Exit code)' \
    "$2" | tail -n "$1" | tr '\n' ' '
}
need_bench() {
  [ -x "$bench" ] || shtest_fail "$bench not built (make all)"
  [ -n "${MPIRUN:-}" ] || shtest_skip "run through make test (MPIRUN comes from make)"
}

# run_recovery NP CASE [MPIRUN_ARGS...]: $bench under `mpirun --enable-recovery` (a plain mpirun ends the job
# when one rank dies on purpose; the ranks leave without MPI_Finalize, which orte_allowed_exit_without_sync
# lets them), NP ranks, its log in $work/run.log and its '# rank' lines shown; the case passes when the
# program's first harness line for CASE is a PASS, skips where it skips.
run_recovery() {
  local np=$1 case=$2 rc line
  shift 2
  # shellcheck disable=SC2086 # MPIRUN_FLAGS is a list of flags
  timeout 300 $MPIRUN $MPIRUN_FLAGS --enable-recovery --mca orte_allowed_exit_without_sync 1 "$@" -np "$np" "$bench" \
    >"$work/run.log" 2>&1
  rc=$?
  line=$(grep -E "^(PASS|FAIL|SKIP) .*$case" "$work/run.log" | head -n 1)
  grep '^# rank' "$work/run.log"
  case "$line" in
    PASS*) return 0 ;;
    SKIP*) line=${line#SKIP * (} && shtest_skip "${line%)}" ;;
    FAIL*) shtest_fail "${line#FAIL }" ;;
    *) shtest_fail "no result line (mpirun exit $rc): $(shtest_tail 5 "$work/run.log")" ;;
  esac
}

# need_refusals: each line of stdin is "ARGS|WANT": $bench ARGS must exit 2 with WANT in its output
# and the usage line, options included (a bad flag is refused with the usage status, named, and the
# program's usage shown). Fails the case at the first that is not.
need_refusals() {
  local args want rc
  while IFS='|' read -r args want; do
    # shellcheck disable=SC2086 # args is a list
    "$bench" $args >"$work/bad.log" 2>&1
    rc=$?
    [ "$rc" = 2 ] && grep -q -- "$want" "$work/bad.log" && grep -qE '^usage: [^ ]+ \[' "$work/bad.log" ||
      shtest_fail "'$args' exited $rc (expected 2, naming '$want', then the usage line): $(head -n 2 "$work/bad.log" | tr '\n' ' ')"
  done
}

shtest_main() {
  local filter=${MCCL_TEST_FILTER:-} list=0 i full rc start
  if [ "${1:-}" = --list ]; then list=1; elif [ $# -gt 0 ]; then filter=$1; fi
  local pass=0 fail=0 skip=0
  for i in "${!shtest_names[@]}"; do
    full="$shtest_suite.${shtest_names[$i]}"
    shtest_selected "$filter" "$full" || continue
    if [ "$list" = 1 ]; then echo "$full"; continue; fi
    : >"$shtest_msg"
    start=$(date +%s%N)
    (cd "$shtest_root" && eval "${shtest_cmds[$i]}")
    rc=$?
    local ms=$((($(date +%s%N) - start) / 1000000))
    case "$rc" in
      0) echo "PASS $full ($ms ms)"; pass=$((pass + 1)) ;;
      77) echo "SKIP $full ($(cat "$shtest_msg"))"; skip=$((skip + 1)) ;;
      *) echo "FAIL $full ($(cat "$shtest_msg"; [ -s "$shtest_msg" ] || echo "exit $rc"))"; fail=$((fail + 1)) ;;
    esac
  done
  [ "$list" = 1 ] && exit 0
  echo "$pass passed, $fail failed, $skip skipped"
  [ "$fail" -eq 0 ]
}
