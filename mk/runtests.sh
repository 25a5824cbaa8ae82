#!/usr/bin/env bash
# Runs test entries and prints one aggregate line last: "N passed, N failed, N skipped".
# Entries: plain:BIN | mpi:NP[,NP...]:BIN | gdb:MODULE_DIR:DEMO_BIN | cudagdb:MODULE_DIR | sh:SCRIPT
# Each binary's own closing line is folded into a '#' comment so the aggregate is the only one.
# MCCL_TEST_FILTER (make's T) selects tests by name in every entry: a pattern with * ? [ is a glob,
# else a substring (as in common/src/test.c); gdb checks are named gdb.<module>, e.g. gdb.05_proxy,
# cuda-gdb checks cudagdb.<module>.
# A filter that selects nothing is an error (exit 2) that lists every test.
# MCCL_DRY_RUN=1: print the names of the selected tests and run nothing (the docs test uses it).
# MCCL_TEST_NESTED=1 (set by the shell tests that call make test): leave out the sh: entries.
# MCCL_TEST_JOBS=N: test binaries at once (below).
set -u
here=$(cd "$(dirname "$0")" && pwd)
TIMEOUT=${MCCL_TEST_TIMEOUT:-900}
FILTER=${MCCL_TEST_FILTER:-}
LIST=${MCCL_DRY_RUN:-}
pass=0 fail=0 skip=0
tmpd=$(mktemp -d)
trap 'rm -rf "$tmpd"' EXIT

# Test binaries at once (MCCL_TEST_JOBS; default on the sim: one per CPU this process may use, at most 8; on a
# GPU host 1, since tests there share the GPUs and some time them). With more than one, each binary's output is
# printed whole when it ends. A sim test binary rarely keeps every core busy (its threads wait on each other, on
# sockets and on peers' processes), so two side by side on two cores end sooner than one after the other. They
# are not pinned to cores: a demo, a gdb walk or a test of many short waits slows down badly on one core.
ncpu=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status 2>/dev/null | tr , '\n' |
  awk -F- '{n += NF == 2 ? $2 - $1 + 1 : 1} END {print n + 0}')
[ "${ncpu:-0}" -ge 1 ] || ncpu=1
if [ -n "${MCCL_TEST_JOBS:-}" ]; then
  jobs=$MCCL_TEST_JOBS
elif [ "${BACKEND:-sim}" = sim ]; then
  jobs=$((ncpu < 8 ? ncpu : 8))
else
  jobs=1
fi
case $jobs in '' | *[!0-9]* | 0) echo "runtests: MCCL_TEST_JOBS must be a positive number, not '$jobs'" >&2; exit 2 ;; esac
# Parallel runs need bash's `wait -n -p` (bash 5.1).
((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501)) || jobs=1

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
  if [ -n "$probe" ] && timeout 60 "$probe" "runtests-probe-matches-nothing" 2>&1 | grep -q 'unexpected memory mapping'; then
    if setarch "$(uname -m)" -R true 2>/dev/null &&
       ! timeout 60 setarch "$(uname -m)" -R "$probe" "runtests-probe-matches-nothing" 2>&1 | grep -q 'unexpected memory mapping'; then
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

# A test binary about to time out shows where it is stuck: shortly before the limit, each of its processes (the
# one of a plain test, every rank of an mpi: one, found by their executable's path, so a run in another tree
# is left alone) prints its threads' backtraces (mk/stacks.sh) as '#' lines. A hang then names its call and
# its thread in the log instead of only its time. MCCL_TEST_STACKS=0 leaves it out.
stacks_later() {  # binary; run in the background, killed when the binary ends in time
  local bin wait pid
  bin=$(readlink -f "$1") || return
  wait=$((TIMEOUT > 60 ? TIMEOUT - 20 : TIMEOUT / 2))
  # The sleep holds no descriptor of the log: killed before it started, this shell would leave it behind,
  # and a sleep holding the pipe that make test's output goes through (`| tee`) kept that pipe open, and
  # the run unfinished, until it ended. The trap ends it with this shell.
  sleep "$wait" </dev/null >/dev/null 2>&1 &
  local s=$!
  trap 'kill "$s" 2>/dev/null; exit 0' TERM
  wait "$s"
  for pid in $(pgrep -x "$(basename "$bin" | cut -c1-15)"); do
    [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$bin" ] || continue
    echo "# stacks: $(basename "$bin") (pid $pid) after ${wait}s of ${TIMEOUT}s:"
    "$here/stacks.sh" "$pid"
  done
}

run_one() {  # name, command...
  local name=$1; shift
  echo "# running $name"
  local start=$SECONDS watcher=""
  if [ -n "${watch_bin:-}" ] && [ "${MCCL_TEST_STACKS:-1}" = 1 ]; then
    stacks_later "$watch_bin" 2>/dev/null &  # its shell's "Terminated" when its sleep is killed stays out of the log
    watcher=$!
  fi
  local tmp=$tmpd/unit.$BASHPID
  timeout -k 10 "$TIMEOUT" ${prefix[@]+"${prefix[@]}"} "$@" 2>&1 |
    sed -u -E 's/^([0-9]+ passed, [0-9]+ failed, [0-9]+ skipped)$/#   \1/' | tee "$tmp"
  local rc=${PIPESTATUS[0]}
  if [ -n "$watcher" ]; then
    pkill -P "$watcher" 2>/dev/null
    kill "$watcher" 2>/dev/null
    wait "$watcher" 2>/dev/null
  fi
  local p f s
  p=$(grep -c '^PASS ' "$tmp"); f=$(grep -c '^FAIL ' "$tmp"); s=$(grep -c '^SKIP ' "$tmp")
  # A timeout is always named, even after a test of the binary failed (its later tests never reported);
  # another non-zero exit is named when no test said FAIL (a crash, an exit outside the tests).
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "FAIL $name (timed out after ${TIMEOUT}s)"
    f=$((f + 1))
  elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name (exited with status $rc)"
    f=1
  fi
  echo "#   $name: $((SECONDS - start)) s"
  rm -f "$tmp"
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
  [ -z "${counts:-}" ] || echo "$p $f $s" >"$counts"
}

matches() {  # name: does FILTER select it?
  local p=$FILTER
  [ -z "$p" ] && return 0
  case "$p" in *[*?[]*) ;; *) p="*$p*" ;; esac
  [[ $1 == $p ]]
}

names() {  # filter kind rest [np]: the names of the tests this entry (or one np of it) selects
  local f=$1 kind=$2 rest=$3 np=${4:-} out="" rc=0
  case "$kind" in
    plain|sh) out=$(MCCL_TEST_FILTER=$f "$rest" --list 2>&1); rc=$? ;;
    mpi) out=$(MCCL_TEST_FILTER=$f "${rest#*:}" --list "$np" 2>&1); rc=$? ;;
    gdb) local n="gdb.$(basename "${rest%%:*}")"; out=$(FILTER=$f; matches "$n" && echo "$n"); rc=0 ;;
    cudagdb) local n="cudagdb.$(basename "$rest")"; out=$(FILTER=$f; matches "$n" && echo "$n"); rc=0 ;;
  esac
  # A binary that cannot list its tests is selected, so that running it reports why.
  if [ "$rc" -ne 0 ]; then echo "${rest#*:} (cannot list its tests: exit $rc)"; else printf '%s' "$out${out:+$'\n'}"; fi
}

# Sanitizer builds (make's SANITIZE=1 or TSAN=1 export MCCL_SANITIZED=1; 3 to 15 times slower) run
# an mpi entry at its smallest and largest rank counts only (mpi:2,3,4 -> 2 and 4), as the C tests
# sample their heavy matrices there (mcclTestSampled); ThreadSanitizer at its smallest only, since it
# watches the threads of one process, which are the same threads whatever the rank count (ASan keeps
# the largest: buffers and offsets grow with the ranks). MCCL_TEST_FULL=1 runs every count, and the
# plain build always does.
nps() {  # the rank counts of an mpi entry's list that run in this build
  local all
  all=$(echo "$1" | tr , ' ')
  if [ "${MCCL_TSAN:-0}" = 1 ] && [ "${MCCL_TEST_FULL:-0}" != 1 ]; then
    echo "$all" | awk '{print $1}'
  elif [ "${MCCL_SANITIZED:-0}" = 1 ] && [ "${MCCL_TEST_FULL:-0}" != 1 ] && [ "$(echo "$all" | wc -w)" -gt 2 ]; then
    echo "$all" | awk '{print $1, $NF}'
  else
    echo "$all"
  fi
}

units() {  # one line per runnable unit: kind<TAB>rest<TAB>np
  local e kind rest np
  for e in "$@"; do
    kind=${e%%:*}; rest=${e#*:}
    case "$kind" in
      plain|gdb|cudagdb) printf '%s\t%s\t\n' "$kind" "$rest" ;;
      sh) [ "${MCCL_TEST_NESTED:-}" = 1 ] || printf '%s\t%s\t\n' "$kind" "$rest" ;;
      mpi) for np in $(nps "${rest%%:*}"); do printf '%s\t%s\t%s\n' "$kind" "$rest" "$np"; done ;;
      *) echo "runtests: bad entry '$e'" >&2; exit 2 ;;
    esac
  done
}

run_unit() {  # kind rest np: run one unit (run_one with its name and command)
  local kind=$1 rest=$2 np=$3 bin dir
  case "$kind" in
    plain) watch_bin=$rest run_one "$(basename "$(dirname "$rest")")/$(basename "$rest")" "$rest" ;;
    sh) run_one "$(basename "$(dirname "$(dirname "$rest")")")/$(basename "$rest" .sh)" "$rest" ;;
    mpi)
      bin=${rest#*:}
      # Open MPI's own allocations outlive MPI_Finalize and show as <unknown module> once its
      # components are unloaded, so LeakSanitizer cannot be suppressed by library there: leaks
      # are checked by the single-process tests, ASan/UBSan errors still fail MPI runs.
      watch_bin=$bin run_one "$(basename "$(dirname "$bin")")/$(basename "$bin")@np$np" \
        env ${ASAN_OPTIONS+ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"} $MPIRUN $MPIRUN_FLAGS -np "$np" "$bin" ;;
    gdb)
      dir=${rest%%:*}; bin=${rest#*:}
      run_one "gdb:$(basename "$dir")" "$here/gdbcheck.sh" "$dir" "$bin" ;;
    cudagdb)
      run_one "cudagdb:$(basename "$rest")" "$here/cudagdbcheck.sh" "$rest" ;;
  esac
}

# Parallel runs: a unit runs in a background shell of its own (a slot), its output into a file that reap() prints
# whole, with the unit's counts, when the unit ends.
running=0 seq=0
slotPid=() slotSeq=()
start_unit() {  # kind rest np
  local k
  while [ "$running" -ge "$jobs" ]; do reap; done
  for ((k = 0; k < jobs; k++)); do [ -z "${slotPid[$k]:-}" ] && break; done
  seq=$((seq + 1))
  (
    exec 3<&- >"$tmpd/out.$seq" 2>&1
    counts=$tmpd/counts.$seq
    run_unit "$@"
  ) &
  slotPid[$k]=$! slotSeq[$k]=$seq
  running=$((running + 1))
}
reap() {  # wait for a unit to end; print its output and add its counts
  local ended="" k
  wait -n -p ended
  for ((k = 0; k < jobs; k++)); do
    # ended is empty when no child was left to wait for: then every slot still marked busy has ended.
    if [ -n "${slotPid[$k]:-}" ] && { [ -z "$ended" ] || [ "${slotPid[$k]}" = "$ended" ]; }; then finish_slot "$k"; fi
  done
}
finish_slot() {  # k
  local out=$tmpd/out.${slotSeq[$1]} cnt=$tmpd/counts.${slotSeq[$1]} p f s
  cat "$out"
  if read -r p f s <"$cnt" 2>/dev/null; then
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
  else
    echo "FAIL $(sed -n 's/^# running //p' "$out" | head -n 1) (its runner ended without a result)"
    fail=$((fail + 1))
  fi
  rm -f "$out" "$cnt"
  slotPid[$1]="" running=$((running - 1))
}

list=$(units "$@") || exit 2
nsel=0
# fd 3: the tests must not read the list as their stdin.
while IFS=$'\t' read -r -u 3 kind rest np; do
  [ -n "$kind" ] || continue
  if [ -n "$FILTER" ] || [ -n "$LIST" ]; then
    sel=$(names "$FILTER" "$kind" "$rest" "$np")
    [ -n "$sel" ] || continue
    nsel=$((nsel + $(printf '%s\n' "$sel" | wc -l)))
    if [ -n "$LIST" ]; then printf '%s\n' "$sel"; continue; fi
  fi
  if [ "$jobs" -gt 1 ]; then start_unit "$kind" "$rest" "$np"; else run_unit "$kind" "$rest" "$np"; fi
done 3<<<"$list"
while [ "$running" -gt 0 ]; do reap; done

if [ -n "$FILTER" ] && [ "$nsel" -eq 0 ]; then
  {
    echo "runtests: T='$FILTER' matches no test. The tests (T is a substring, or a glob with * ? [):"
    while IFS=$'\t' read -r kind rest np; do [ -z "$kind" ] || names "" "$kind" "$rest" "$np"; done <<<"$list" | sed 's/^/  /'
  } >&2
  exit 2
fi
if [ -n "$LIST" ]; then echo "# $nsel tests selected"; exit 0; fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
