#!/usr/bin/env bash
# On a host with one GPU, every test of the labs and of final passes or skips ("needs 2 devices"): none goes on
# with communicators or devices it never got. The sim plays that host (MCCL_SIM_DEVICES=1) for each single-process
# test binary of the labs and final (common's and the sim's own tests do not depend on the device count, and the
# sim's check that it has 4 by default). Sanitizer builds leave it to the plain build.
. "$(dirname "$0")/shtest_lib.sh"

oneDevicePassesOrSkips() {
  [ "${BACKEND:-sim}" = sim ] || shtest_skip "the sim plays the one-device host (BACKEND=$BACKEND)"
  # What it checks is the tests' own logic, which a sanitizer build runs no differently (and 3-15 times slower).
  [ "${MCCL_SANITIZED:-0}" = 1 ] && shtest_skip "left to the plain build: it checks the tests' logic"
  local bin dir=${MCCL_BIN_DIR:?run by make test} n=0 bad="" out rc
  out=$(mktemp)
  for bin in "$dir"/[0-9][0-9]_*/test_* "$dir"/final/test_*; do
    [ -f "$bin" ] && [ -x "$bin" ] || continue
    MCCL_SIM_DEVICES=1 MCCL_TEST_FILTER='' timeout 300 "$bin" >"$out" 2>&1
    rc=$?
    n=$((n + 1))
    if [ "$rc" -ne 0 ] || grep -q '^FAIL ' "$out"; then
      bad+="$(basename "$(dirname "$bin")")/$(basename "$bin") (exit $rc: $(grep -m 1 '^FAIL ' "$out" | cut -c1-160)); "
    fi
  done
  rm -f "$out"
  [ "$n" -gt 0 ] || shtest_fail "no test binary under $dir"
  [ -z "$bad" ] || shtest_fail "with one device: $bad"
}

shtest_case oneDevicePassesOrSkips oneDevicePassesOrSkips
shtest_main "$@"
