#!/usr/bin/env bash
# Runs test entries and prints one aggregate line last: "N passed, N failed, N skipped".
# Entries: plain:BIN | mpi:NP[,NP...]:BIN | gdb:MODULE_DIR:DEMO_BIN
# Each binary's own closing line is folded into a '#' comment so the aggregate is the only one.
set -u
here=$(cd "$(dirname "$0")" && pwd)
TIMEOUT=${MCCL_TEST_TIMEOUT:-900}
pass=0 fail=0 skip=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

run_one() {  # name, command...
  local name=$1; shift
  echo "# running $name"
  local start=$SECONDS
  timeout -k 10 "$TIMEOUT" "$@" 2>&1 | sed -u -E 's/^([0-9]+ passed, [0-9]+ failed, [0-9]+ skipped)$/#   \1/' | tee "$tmp"
  local rc=${PIPESTATUS[0]}
  local p f s
  p=$(grep -c '^PASS ' "$tmp"); f=$(grep -c '^FAIL ' "$tmp"); s=$(grep -c '^SKIP ' "$tmp")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "FAIL $name (timed out after ${TIMEOUT}s)"
    else echo "FAIL $name (exited with status $rc)"; fi
    f=1
  fi
  echo "#   $name: $((SECONDS - start)) s"
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
}

for e in "$@"; do
  kind=${e%%:*}; rest=${e#*:}
  case "$kind" in
    plain) run_one "$(basename "$(dirname "$rest")")/$(basename "$rest")" "$rest" ;;
    mpi)
      nps=${rest%%:*}; bin=${rest#*:}
      for np in ${nps//,/ }; do
        # Open MPI's own allocations outlive MPI_Finalize and show as <unknown module> once its
        # components are unloaded, so LeakSanitizer cannot be suppressed by library there: leaks
        # are checked by the single-process tests, ASan/UBSan errors still fail MPI runs.
        run_one "$(basename "$(dirname "$bin")")/$(basename "$bin")@np$np" \
          env ${ASAN_OPTIONS+ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"} $MPIRUN $MPIRUN_FLAGS -np "$np" "$bin"
      done ;;
    gdb)
      dir=${rest%%:*}; bin=${rest#*:}
      run_one "gdb:$(basename "$dir")" "$here/gdbcheck.sh" "$dir" "$bin" ;;
    *) echo "runtests: bad entry '$e'" >&2; exit 2 ;;
  esac
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
