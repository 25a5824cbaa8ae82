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

# TSAN=1: ThreadSanitizer needs the address layout it was built for. On kernels that randomise
# mmap more than it supports (vm.mmap_rnd_bits > 28 with gcc 12's TSan) every binary dies at start
# with "FATAL: ThreadSanitizer: unexpected memory mapping". Probe one binary once: if it dies so,
# run every test with ASLR off (setarch -R; mpirun's ranks inherit it); if that is refused too,
# stop with what to do instead of reporting one FAIL per binary.
prefix=()
if [ "${MCCL_TSAN:-0}" = 1 ]; then
  probe=""
  for e in "$@"; do
    case "${e%%:*}" in plain) probe=${e#plain:}; break ;; mpi) probe=${e#*:}; probe=${probe#*:}; break ;; esac
  done
  if [ -n "$probe" ] && "$probe" "runtests-probe-matches-nothing" 2>&1 | grep -q 'unexpected memory mapping'; then
    if setarch "$(uname -m)" -R true 2>/dev/null &&
       ! setarch "$(uname -m)" -R "$probe" "runtests-probe-matches-nothing" 2>&1 | grep -q 'unexpected memory mapping'; then
      echo "# TSan: this kernel's mmap randomisation is too high for TSan; running the tests under setarch -R"
      prefix=(setarch "$(uname -m)" -R)
    else
      echo "FAIL tsan-setup (ThreadSanitizer: unexpected memory mapping, and setarch -R is refused or does not help:" \
           "lower vm.mmap_rnd_bits to 28, e.g. sudo sysctl vm.mmap_rnd_bits=28)"
      echo "0 passed, 1 failed, 0 skipped"
      exit 1
    fi
  fi
fi

run_one() {  # name, command...
  local name=$1; shift
  echo "# running $name"
  local start=$SECONDS
  timeout -k 10 "$TIMEOUT" ${prefix[@]+"${prefix[@]}"} "$@" 2>&1 | sed -u -E 's/^([0-9]+ passed, [0-9]+ failed, [0-9]+ skipped)$/#   \1/' | tee "$tmp"
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
