#!/usr/bin/env bash
# Commands must not report success for nothing: make's LAB and T filters that match nothing fail
# and list what exists; every example and benchmark answers --help and refuses unknown arguments
# (common/include/mccl_args.h); a test that hangs is named with where it hangs. Run by make test (needs MCCL_MAKE_VARS and MCCL_BIN_DIR from make).
. "$(dirname "$0")/shtest_lib.sh"

out=$(mktemp)
trap 'rm -f "$shtest_msg" "$out"' EXIT

# expect_fail "what it must list" make-args...: the nested make exits non-zero and says it
expect_fail() {
  local want=$1; shift
  shtest_make "$@" >"$out" 2>&1
  local rc=$?
  [ "$rc" -ne 0 ] || shtest_fail "make $* exited 0: $(tail -n 1 "$out")"
  grep -q -- "$want" "$out" || shtest_fail "make $* (exit $rc) does not list '$want': $(tail -n 2 "$out" | tr '\n' ' ')"
}

labThatNamesNothing() {
  expect_fail 01_vmm_alloc test LAB=99
  expect_fail 01_vmm_alloc test LAB=1
  expect_fail 05_proxy demo LAB=99
  expect_fail 04_shm_transport bench LAB=99
  expect_fail 02_host_numa gdb LAB=99
  expect_fail 03_ipc_export demo LAB=common
}

testFilterThatMatchesNothing() {
  expect_fail gdb.05_proxy test T=nonexistent-test-name
  expect_fail test_alloc.gateFollowsParameter test LAB=01 T=nonexistent-test-name
  # A filter for another lab's test within LAB selects nothing either.
  expect_fail gdb.03_ipc_export test LAB=03 T=gateFollowsParameter
}

# T applies to the gdb checks too: they are named gdb.<module>.
testFilterSelectsGdbChecks() {
  MCCL_DRY_RUN=1 shtest_make test T=gdb.05 >"$out" 2>&1 || shtest_fail "make test T=gdb.05 failed: $(tail -n 3 "$out")"
  [ "$(grep -cv '^#\|^make\|^deps:' "$out")" = 1 ] && grep -qx gdb.05_proxy "$out" ||
    shtest_fail "expected T=gdb.05 to select only gdb.05_proxy, got: $(tr '\n' ' ' <"$out")"
  MCCL_DRY_RUN=1 shtest_make test LAB=01 T=gateFollows >"$out" 2>&1 || shtest_fail "make test LAB=01 T=gateFollows failed"
  grep -q '^gdb\.' "$out" && shtest_fail "T=gateFollows also selected a gdb check: $(tr '\n' ' ' <"$out")"
  return 0
}

programsAnswerHelpAndRefuseUnknown() {
  local bin=${MCCL_BIN_DIR:?run by make test} n=0 src name prog rc
  for src in labs/*/examples/*.c labs/*/bench/*.c; do
    name=$(basename "$src" .c)
    prog=$bin/$(basename "$(dirname "$(dirname "$src")")")/$name
    [ -x "$prog" ] || shtest_fail "no binary $prog for $src (make all)"
    timeout 20 "$prog" --help >"$out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || shtest_fail "$prog --help exited $rc"
    head -n 1 "$out" | grep -q "^usage: $name\b" || shtest_fail "$prog --help: first line is not 'usage: $name ...': $(head -n 1 "$out")"
    timeout 20 "$prog" --no-such-option >"$out" 2>"$out.err"
    rc=$?
    [ "$rc" -eq 2 ] || shtest_fail "$prog --no-such-option exited $rc, expected 2"
    [ -s "$out" ] && shtest_fail "$prog --no-such-option wrote to stdout: $(head -n 1 "$out")"
    grep -q "^usage: $name" "$out.err" || shtest_fail "$prog --no-such-option: no usage line on stderr"
    rm -f "$out.err"
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] || shtest_fail "no example or benchmark found"
}

# The lab 02 demo must not report a self-test that MCCL_CUMEM_HOST_ENABLE=0 skips.
lab02GateOffRunsNoSelfTest() {
  local prog=${MCCL_BIN_DIR:?run by make test}/02_host_numa/demo
  MCCL_CUMEM_HOST_ENABLE=0 timeout 60 "$prog" >"$out" 2>&1 || shtest_fail "$prog with MCCL_CUMEM_HOST_ENABLE=0 failed"
  grep -q 'self-test ->' "$out" && shtest_fail "claims a self-test result: $(grep 'self-test' "$out")"
  grep -q 'no self-test runs' "$out" || shtest_fail "does not say the gate is off without a self-test"
}

# A test binary that outlives MCCL_TEST_TIMEOUT: the runner shows its threads' backtraces (mk/stacks.sh) before
# it kills it, so the log names the function it hung in, then fails it as timed out.
hangShowsStacks() {
  command -v gdb >/dev/null || command -v cuda-gdb >/dev/null || shtest_skip "no gdb or cuda-gdb (make deps installs gdb)"
  local dir
  dir=$(mktemp -d)
  printf '#include <unistd.h>\nvoid __attribute__((noinline)) waitForAPeerThatNeverComes(void) { for (;;) pause(); }\nint main(void) { waitForAPeerThatNeverComes(); }\n' >"$dir/hang.c"
  gcc -g -O0 -o "$dir/hang_forever" "$dir/hang.c" || { rm -rf "$dir"; shtest_fail "gcc could not build the hanging program"; }
  # Not a sanitizer build's binary: no TSan probe (it would run the program, which never returns).
  env -u MCCL_TSAN MCCL_TEST_TIMEOUT=8 MCCL_TEST_FILTER= MCCL_DRY_RUN= "$shtest_root/mk/runtests.sh" \
    "plain:$dir/hang_forever" >"$out" 2>&1
  rm -rf "$dir"
  grep -q '^# stacks: hang_forever (pid [0-9]*)' "$out" || shtest_fail "no stacks line: $(tail -n 3 "$out" | tr '\n' ' ')"
  grep -q '^#   #[0-9].* waitForAPeerThatNeverComes ' "$out" || shtest_fail "the stacks do not name the function it hangs in: $(grep -m 4 '^#   ' "$out" | tr '\n' ' ')"
  grep -q '^FAIL .*hang_forever (timed out after 8s)' "$out" || shtest_fail "not failed as timed out: $(tail -n 2 "$out" | tr '\n' ' ')"
}

# Each test binary has a stacks watcher beside it (a sleep of almost MCCL_TEST_TIMEOUT); one killed before its
# sleep began left the sleep behind, holding make test's output pipe, so `make test | tee` did not end until the
# sleep did (580 s here). 100 quick binaries on a loaded machine (where that happened): the pipe closes when
# runtests ends (within 240 s, for a machine already loaded by more than the two loops added here).
quickUnitsCloseTheirOutput() {
  local -a units=() hogs=()
  for _ in $(seq 100); do units+=("plain:/bin/true"); done
  for _ in 1 2; do
    (while :; do :; done) &
    hogs+=($!)
  done
  local start=$SECONDS
  timeout 300 bash -c 'env -u MCCL_TSAN MCCL_TEST_TIMEOUT=600 MCCL_TEST_FILTER= MCCL_DRY_RUN= "$@" | cat >/dev/null' _ \
    "$shtest_root/mk/runtests.sh" "${units[@]}"
  local rc=$? took=$((SECONDS - start))
  kill "${hogs[@]}" 2>/dev/null
  wait "${hogs[@]}" 2>/dev/null
  [ "$rc" -eq 0 ] && [ "$took" -le 240 ] ||
    shtest_fail "runtests' output stayed open: the pipeline took ${took}s (exit $rc) for 100 binaries that end at once"
}

# MCCL_TEST_JOBS=2: two binaries at once, each one's output printed whole (its '# running' line, its own lines,
# its time), and the counts of all of them, a failing one's included, summed.
parallelUnitsRunSideBySideAndWhole() {
  local dir
  dir=$(mktemp -d)
  printf '#!/bin/bash\necho "PASS unit.first"\nsleep 2\necho "PASS unit.second"\n' >"$dir/unit"
  printf '#!/bin/bash\necho "FAIL bad.one"\nexit 1\n' >"$dir/bad"
  chmod +x "$dir/unit" "$dir/bad"
  local start=$SECONDS
  env -u MCCL_TSAN MCCL_TEST_JOBS=2 MCCL_TEST_TIMEOUT=60 MCCL_TEST_FILTER= MCCL_DRY_RUN= \
    "$shtest_root/mk/runtests.sh" "plain:$dir/unit" "plain:$dir/unit" "plain:$dir/bad" "plain:$dir/unit" \
    "plain:$dir/unit" >"$out" 2>&1
  local rc=$? took=$((SECONDS - start))
  rm -rf "$dir"
  [ "$rc" -ne 0 ] || shtest_fail "a failing binary, yet runtests exited 0"
  [ "$(tail -n 1 "$out")" = "8 passed, 1 failed, 0 skipped" ] || shtest_fail "counts: $(tail -n 1 "$out")"
  # Four binaries of 2 s on two slots: 4 s side by side, 8 s one after the other.
  [ "$took" -le 7 ] || shtest_fail "took ${took}s: the binaries did not run side by side"
  awk '/^# running / { if (inUnit) { print "a block interrupted: " $0; bad = 1 } inUnit = 1; next }
       inUnit && /^(PASS|FAIL)/ { next }
       inUnit && /^#   .*: [0-9]+ s$/ { inUnit = 0; next }
       END { exit bad }' "$out" >"$out.why" || shtest_fail "$(head -n 3 "$out.why" | tr '\n' ' ')"
  [ "$(grep -c '^# running ' "$out")" -eq 5 ] || shtest_fail "expected 5 units' blocks: $(grep -c '^# running ' "$out")"
  rm -f "$out.why"
}

shtest_case labThatNamesNothing labThatNamesNothing
shtest_case testFilterThatMatchesNothing testFilterThatMatchesNothing
shtest_case testFilterSelectsGdbChecks testFilterSelectsGdbChecks
shtest_case programsAnswerHelpAndRefuseUnknown programsAnswerHelpAndRefuseUnknown
shtest_case lab02GateOffRunsNoSelfTest lab02GateOffRunsNoSelfTest
shtest_case hangShowsStacks hangShowsStacks
shtest_case quickUnitsCloseTheirOutput quickUnitsCloseTheirOutput
shtest_case parallelUnitsRunSideBySideAndWhole parallelUnitsRunSideBySideAndWhole
shtest_main "$@"
