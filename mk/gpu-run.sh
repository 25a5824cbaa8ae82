#!/usr/bin/env bash
# One call on a GPU host: environment report, build, tests, demo and benchmarks (BACKEND=cuda),
# each logged under $OUT. MCCL_COMMIT names the commit (the copied tree may have no .git).
# Lab 07's and final's benchmark runs also write CSV and JSON beside their logs (bench07*.csv/.json,
# allreduce_perf_{eager,graph}.csv/.json), charted with make plot (*-latency.png, *-busbw.png) when
# this host's Python has matplotlib. MCCL_BENCH_FINAL=0 leaves out final's two allreduce_perf runs.
# MCCL_DROPIN=1 adds the drop-in's clients: nccl-tests (mk/nccl-tests.sh, NCCL_TESTS_SRC, default
# third_party/nccl-tests, carried to the host) and the PyTorch check (final/tests/torch_dropin.py).
# MCCL_TESTS="LAB:T ..." runs only those tests (see the test step). MCCL_WATCHDOG_AB=1 times small
# allreduces with the watchdog on and off.
# MCCL_FAULTS=1 adds the faults of nccl_faults on minccl and NCCL (see the step).
# MCCL_DEVAPI=1 adds NCCL's device API: mpi_nccl_devapi's tests and timings on minccl and NCCL (see the step).
# MCCL_TORCH_BENCH=1 adds PyTorch's all_reduce timed on the drop-in and on torch's NCCL (see the step).
# MCCL_NET=1 adds the net path beside NCCL's (allreduce_perf --hosts 2; see the step).
# MCCL_NT_BARS=1 adds nccl-tests' allreduce, allgather and reduce-scatter on the drop-in and on NCCL, side by side.
# MCCL_SHARED_GPU=1 adds correctness checks with several ranks on one GPU (see the step).
# MCCL_CE=1 adds lab 10's copy-engine benchmark beside NCCL's copy engines (see the step); MCCL_CE_AR=1 its
# copy-engine-assisted allreduce beside two-shot and NCCL.
# MCCL_PROFILE=1 adds kernel durations under Nsight Compute (one-pass metric, --clock-control none) of
# minccl's and NCCL's allreduce kernels at MCCL_PROFILE_SIZES (default 8 8K 2M), see mk/gpu-profile.sh.
# With .gpucache/cuobj.tar (mk/gpu-prebuild.sh, carried) the build step takes its device objects from there.
# At exit (also on a timeout's TERM) everything under $OUT is packed into $OUT/gpu-run.tgz: the
# device tool brings back a limited number of files, and a run writes dozens (MCCL_PACK=0: unpacked).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
pack() {
  local t
  t=$(mktemp) && (cd "$OUT" && tar czf "$t" --exclude=gpu-run.tgz . && find . -mindepth 1 -delete &&
    mv "$t" gpu-run.tgz && chmod 644 gpu-run.tgz) 2>/dev/null
}
[ "${MCCL_PACK:-1}" = 1 ] && trap pack EXIT && trap 'exit 143' TERM
export NCCL_NVLS_ENABLE=0  # never use NVLink multicast on shared hosts
export MCCL_TEST_TIMEOUT=${MCCL_TEST_TIMEOUT:-240}
# Each lab's cuda-gdb walk (make test's cudagdb.<module>) keeps its whole transcript here.
export MCCL_CUDAGDB_LOG=${MCCL_CUDAGDB_LOG:-$OUT/cudagdb}
mkdir -p "$MCCL_CUDAGDB_LOG"
if [ -z "${MCCL_NCCL_LIB:-}" ]; then
  d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
  [ -n "$d" ] && [ -f "$d/lib/libnccl.so.2" ] && export MCCL_NCCL_LIB="$d/lib/libnccl.so.2"
fi
# The drop-in needs NCCL 2.28's nccl.h: the CUDA Toolkit's, else the one beside python's NCCL.
if [ -z "${NCCL_INCLUDE:-}" ] && [ ! -f "$(dirname "$(dirname "$(command -v nvcc)")")/include/nccl.h" ] &&
  [ -n "${MCCL_NCCL_LIB:-}" ] && [ -f "$(dirname "$(dirname "$MCCL_NCCL_LIB")")/include/nccl.h" ]; then
  export NCCL_INCLUDE NCCL_LIB_DIR
  NCCL_INCLUDE=$(dirname "$(dirname "$MCCL_NCCL_LIB")")/include NCCL_LIB_DIR=$(dirname "$MCCL_NCCL_LIB")
fi
commit=${MCCL_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
[ "$commit" = unknown ] || export MCCL_COMMIT=$commit  # the benchmarks' CSV/JSON metadata
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
  nvidia-smi topo -m
  echo "nvcc: $(nvcc --version | tail -1)"
  echo "mpirun: $(mpirun --version | head -1)"
  echo "NCCL library: ${MCCL_NCCL_LIB:-not found}"
  echo "nccl.h: ${NCCL_INCLUDE:-from the CUDA Toolkit}"
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
step() { echo; echo "######## $1 ($SECONDS s)"; }
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
# MCCL_NP: the ranks of the multi-GPU runs (lab 07's and final's benchmarks, nccl-tests, PyTorch, the A/B and
# sweeps), one process per GPU; default: every GPU of the host, at least 2. The sanitizers' two-rank run and
# the net step's two posing hosts keep 2.
np=${MCCL_NP:-$(( ngpu < 2 ? 2 : ngpu ))}
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
mr="$mpi -np $np"
export MCCL_BENCH_NP=$np  # make bench's mpi entries (mk/runbench.sh)
# An allreduce_perf log's 8 B and 8 KiB rows, one line: size, row, out-of-place/in-place time (the A/B and
# sweep summaries).
small_times() {
  awk '($1 == 8 || $1 == 8192) && $7 ~ /^[0-9.]+$/ { printf "%s %s %s/%s us; ", $1, $6, $7, $11 }' "$1"
}
# An allreduce_perf log's minccl rows from 1 MiB up, one line: size, out-of-place/in-place busbw (the sweeps).
big_rows() {
  awk '$1 ~ /^[0-9]+$/ && $1 >= 1048576 && $6 == "minccl" && $7 ~ /^[0-9.]+$/ { printf "%s %s/%s GB/s; ", $1, $9, $13 }' "$1"
}
# A nccl-tests log's rows, one line: size, out-of-place / in-place time and busbw, #wrong (the A/B and sweeps).
nt_rows() {
  awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 12 { printf "%s B %s/%s us %s/%s GB/s (wrong %s/%s); ", $1, $6, $10, $8, $12, $9, $13 }' "$1"
}
# nccl-tests for the A/B and sweep below: nt_run LIBDIR TEST LOG [VAR=value] runs build/cuda/nccl-tests/TEST
# (built once here if the drop-in step did not build it) on the libnccl.so.2 in LIBDIR, MCCL_NP ranks,
# -b MCCL_AB_NT_MIN (default 1M) -e MCCL_AB_NT_MAX (512M) -f 4 -g 1 -c 1 and MCCL_AB_NT_ARGS (e.g. "-u 1":
# buffers offset by one element), VAR=value in its environment.
nt_run() {
  local lib=$1 t=$2 log=$3 set=${4:-}
  [ -x build/cuda/nccl-tests/all_reduce_perf ] || mk/nccl-tests.sh NCCL_TESTS_SRC="${NCCL_TESTS_SRC:-third_party/nccl-tests}" \
    OUT="$(dirname "$log")" BUILD_ONLY=1 > "$(dirname "$log")/build-nccl-tests.log" 2>&1 || echo "nccl-tests build FAILED"
  # shellcheck disable=SC2046 # the optional words are lists
  env ${set:+"$set"} LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" mpirun --bind-to none -x NCCL_NVLS_ENABLE \
    -x LD_LIBRARY_PATH ${set:+-x "${set%%=*}"} $asroot -np "$np" \
    "build/cuda/nccl-tests/$t" -b "${MCCL_AB_NT_MIN:-1M}" -e "${MCCL_AB_NT_MAX:-512M}" -f 4 -g 1 -c 1 ${MCCL_AB_NT_ARGS:-} > "$log" 2>&1
}
step build
# Device objects compiled elsewhere by mk/gpu-prebuild.sh (carried in .gpucache), taken only where this host's
# nvcc and the files they were compiled from (the pack's list) give the pack's stamp, and made newer than their sources so that make keeps them.
if [ -f .gpucache/cuobj.tar ]; then
  if tar -xOf .gpucache/cuobj.tar build/cuda/obj/PREBUILT.deps >"$OUT/prebuilt.deps" 2>/dev/null &&
    [ "$(tar -xOf .gpucache/cuobj.tar build/cuda/obj/PREBUILT)" = "$(mk/gpu-prebuild.sh --stamp "$OUT/prebuilt.deps")" ]; then
    tar -xf .gpucache/cuobj.tar && tar -tf .gpucache/cuobj.tar | xargs touch &&
      echo "prebuilt device objects: $(tar -tf .gpucache/cuobj.tar | grep -c '\.cu\.o$') from .gpucache"
  else echo "prebuilt device objects not used: their stamp is not this tree's (mk/gpu-prebuild.sh --stamp)"; fi
fi
# -k: one file a newer compiler rejects must not hide every other result; its errors are shown.
make -k -j"$(nproc)" BACKEND=cuda all > "$OUT/build.log" 2>&1 || { echo "BUILD FAILED (continuing with what built):"; grep -E 'error' "$OUT/build.log" | head -20; }
# MCCL_BENCH_SUITE=0 leaves out make bench (the other bench steps keep their own knobs).
# MCCL_TEST=0 / MCCL_BENCH=0 leave out the tests (and demo, sanitizers) / the benchmarks, to split a
# run over two calls of the lease's 10-minute limit.
if [ "${MCCL_TEST:-1}" = 1 ]; then
# LABS="06 07" runs the tests, demos and benchmarks of those modules only (LAB=NN: one).
LABS=${LABS:-${LAB:-}}
# MCCL_TESTS="final:test_api 07_allreduce:mpi_comm": only these LAB:T pairs (T as make test's), in place of
# the modules' whole suites; their '# ' lines (measured times) are kept in the summary too.
if [ -n "${MCCL_TESTS:-}" ]; then
  step "test ($MCCL_TESTS)"
  for lt in $MCCL_TESTS; do make BACKEND=cuda test LAB="${lt%%:*}" T="${lt#*:}" 2>&1; done | tee "$OUT/test.log" |
    grep -E '^(FAIL|SKIP|PASS)|passed,|^# (rank|[a-z].* took|mccl)'
else
step "test (${LABS:-all})"
if [ -z "$LABS" ]; then make BACKEND=cuda test 2>&1 | tee "$OUT/test.log" | grep -E '^(FAIL|SKIP)|passed,'
else for l in $LABS; do make BACKEND=cuda test LAB=$l 2>&1; done | tee "$OUT/test.log" | grep -E '^(FAIL|SKIP)|passed,'; fi
fi
if [ -z "${MCCL_TESTS:-}" ]; then  # a run of chosen tests leaves the demos out too
step demo
if [ -z "$LABS" ]; then make BACKEND=cuda demo > "$OUT/demo.log" 2>&1
else for l in $LABS; do make BACKEND=cuda demo LAB=$l; done > "$OUT/demo.log" 2>&1; fi
echo "demo exit $?"
fi
# Kernel code under the GPU's own checkers, on lab 06's kernel tests named by MCCL_SANITIZE_FILTER (default:
# the three-endpoint chains, every op and both protocols; MCCL_SANITIZE=0 skips).
if [ "${MCCL_SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  step "compute-sanitizer (lab 06 test_prims: memcheck, racecheck, synccheck; lab 07 mpi_allreduce: memcheck, racecheck, synccheck; mpi_sendrecv: memcheck, synccheck, racecheck)"
  # MCCL_SANITIZE_PRIMS=0 leaves lab 06's runs out, MCCL_SANITIZE_07=0 lab 07's.
  for tool in $([ "${MCCL_SANITIZE_PRIMS:-1}" = 1 ] && echo memcheck racecheck synccheck); do
    MCCL_TEST_FILTER=${MCCL_SANITIZE_FILTER:-chain} timeout ${MCCL_SANITIZE_TIMEOUT:-150} compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
      build/cuda/bin/06_device_kernels/test_prims \
      > "$OUT/sanitizer-$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $? ($(grep -cE '^(PASS|FAIL) ' "$OUT/sanitizer-$tool.log") tests; $(tail -1 "$OUT/sanitizer-$tool.log"))"
  done
  # Two ranks (sharing the GPU where there is one): the ring, one-shot and two-shot kernels (their barriers,
  # the signal area's flags) under each of the three tools.
  if [ -x build/cuda/bin/07_allreduce/mpi_allreduce ] && [ "${MCCL_SANITIZE_07:-1}" = 1 ]; then
    for tool in synccheck memcheck racecheck; do
      log="$OUT/sanitizer-$tool-07.log"
      # shellcheck disable=SC2086 # mpi is a list
      timeout ${MCCL_SANITIZE_TIMEOUT:-150} $mpi -np 2 -x NCCL_NVLS_ENABLE compute-sanitizer --tool $tool \
        --report-api-errors no --error-exitcode 9 build/cuda/bin/07_allreduce/mpi_allreduce > "$log" 2>&1
      echo "compute-sanitizer $tool lab 07 mpi_allreduce np2: exit $? ($(grep -cE '^(PASS|FAIL) ' "$log") tests; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c | tr -s ' ' | tr '\n' ';'))"
    done
  fi
  # Lab 10's copy-engine collectives and the assisted allreduce's reduce kernel (its flags, its packed loads):
  # test_ce, one process driving every GPU, under memcheck and racecheck (MCCL_SANITIZE_CE=0 skips).
  if [ "${MCCL_SANITIZE_CE:-1}" = 1 ] && [ -x build/cuda/bin/10_copy_engines/test_ce ]; then
    for tool in memcheck racecheck; do
      log="$OUT/sanitizer-$tool-ce.log"
      timeout ${MCCL_SANITIZE_TIMEOUT:-150} compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
        build/cuda/bin/10_copy_engines/test_ce > "$log" 2>&1
      echo "compute-sanitizer $tool lab 10 test_ce: exit $? ($(grep -cE '^(PASS|FAIL) ' "$log") tests; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c | tr -s ' ' | tr '\n' ';'))"
    done
  fi
  # Send/receive's kernels (SIMPLE and LL, mixed in one launch) under memcheck. The driver calls that
  # fail by design are not reported (--report-api-errors no): cuMemCreate with fabric handles, refused
  # without IMEX channels before the POSIX-fd retry, and cuMemRetainAllocationHandle walking a mapping
  # back to its start (labs/01_vmm_alloc/src/alloc.c).
  # synccheck and racecheck on connectionAcrossLayouts only: a split work's send and receive groups (named
  # barriers 15, 14, 13) then one-direction works on the whole block, SIMPLE and LL.
  if [ -x build/cuda/bin/07_allreduce/mpi_sendrecv ] && [ "${MCCL_SANITIZE_07:-1}" = 1 ]; then
    for tool in memcheck synccheck racecheck; do
      log="$OUT/sanitizer-$tool-sendrecv.log"
      filter=""; [ $tool = memcheck ] || filter=Layouts
      # shellcheck disable=SC2086 # mpi is a list
      MCCL_TEST_FILTER=$filter timeout ${MCCL_SANITIZE_TIMEOUT:-150} $mpi -np 2 -x NCCL_NVLS_ENABLE -x MCCL_TEST_FILTER \
        compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
        build/cuda/bin/07_allreduce/mpi_sendrecv > "$log" 2>&1
      echo "compute-sanitizer $tool lab 07 mpi_sendrecv np2${filter:+ ($filter)}: exit $? ($(grep -cE '^(PASS|FAIL) ' "$log") tests; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c | tr -s ' ' | tr '\n' ';'))"
    done
  fi
fi
fi
if [ "${MCCL_BENCH:-1}" = 1 ]; then
step bench
# Lab 07's table as CSV and JSON too (runbench.sh adds MCCL_BENCH_ARGS_<binary> to its command line).
export MCCL_BENCH_ARGS_mpi_bench_allreduce="${MCCL_BENCH_ARGS_mpi_bench_allreduce:-} --csv $OUT/bench07.csv --json $OUT/bench07.json"
if [ "${MCCL_BENCH_SUITE:-1}" = 0 ]; then echo "make bench left out (MCCL_BENCH_SUITE=0)"
elif [ -z "${LABS:-}" ]; then make BACKEND=cuda bench 2>&1 | tee "$OUT/bench.log" | tail -80
else for l in $LABS; do make BACKEND=cuda bench LAB=$l 2>&1; done | tee "$OUT/bench.log" | tail -80; fi
# Lab 07's benchmark times a CUDA graph and the SHM path in runs of their own, and the tuning sweep; 2 GPUs at least.
b07=build/cuda/bin/07_allreduce/mpi_bench_allreduce
if [ -x "$b07" ] && { [ -z "${LABS:-}" ] || [[ " $LABS " == *" 07 "* ]]; } && [ "${MCCL_BENCH07_EXTRA:-1}" = 1 ] &&
  [ "$ngpu" -ge 2 ]; then
  step "lab 07 bench: -G 1 (graph), --shm, --tune"
  for run in graph shm tune; do
    case $run in graph) args="-G 1 -e 64K" n=9 ;; shm) args="--shm -b 1M" n=10 ;; tune) args="--tune" n=8 ;; esac
    # shellcheck disable=SC2086 # mr and args are lists
    $mr "$b07" $args --csv "$OUT/bench07_$run.csv" --json "$OUT/bench07_$run.json" > "$OUT/bench07_$run.log" 2>&1
    echo "$run exit $?"; tail -$n "$OUT/bench07_$run.log"
  done
fi
# final's allreduce_perf beside NCCL in the same run on the same buffers: eager launches and a CUDA
# graph of the calls replayed 20 times, MCCL_NP GPUs, one process each (nccl-tests -g 1); the tail shown
# is the run's summary.
bf=build/cuda/bin/final/allreduce_perf
if [ -x "$bf" ] && { [ -z "${LABS:-}" ] || [[ " $LABS " == *" final "* ]]; } && [ "${MCCL_BENCH_FINAL:-1}" = 1 ] &&
  [ "$ngpu" -ge 2 ]; then
  step "final allreduce_perf --nccl: eager, -G 20"
  for run in eager graph; do
    case $run in eager) args="" ;; graph) args="-G 20" ;; esac
    # shellcheck disable=SC2086 # mr and args are lists
    $mr "$bf" --nccl -b 8 -e 1G -f 2 $args --progress --csv "$OUT/allreduce_perf_$run.csv" \
      --json "$OUT/allreduce_perf_$run.json" > "$OUT/allreduce_perf_$run.log" 2>&1
    echo "$run exit $?"; tail -12 "$OUT/allreduce_perf_$run.log"
  done
fi
# MCCL_WATCHDOG_AB=1: final's allreduce_perf at 8 B and 8 KiB, eager and in a CUDA graph, with the watchdog
# at its default and off (MCCL_WATCHDOG_TIMEOUT=0), alternating MCCL_WATCHDOG_AB_REPS times (3), NCCL beside.
if [ "${MCCL_WATCHDOG_AB:-0}" = 1 ] && [ -x "$bf" ] && [ "$ngpu" -ge 2 ]; then
  step "watchdog on / off: allreduce_perf 8 B and 8 KiB, eager and -G 20"
  for rep in $(seq "${MCCL_WATCHDOG_AB_REPS:-3}"); do
    for wd in on off; do
      for run in eager graph; do
        case $run in eager) args="" ;; graph) args="-G 20" ;; esac
        log="$OUT/watchdog_${wd}_${run}_$rep.log"
        # shellcheck disable=SC2086 # mr and args are lists
        if [ $wd = off ]; then MCCL_WATCHDOG_TIMEOUT=0 $mr -x MCCL_WATCHDOG_TIMEOUT "$bf" --nccl -b 8 -e 8K -f 1024 $args > "$log" 2>&1
        else $mr "$bf" --nccl -b 8 -e 8K -f 1024 $args > "$log" 2>&1; fi
        echo "watchdog $wd $run #$rep: $(small_times "$log")"
      done
    done
  done
fi
csvs=$(ls "$OUT"/bench07*.csv "$OUT"/allreduce_perf*.csv 2>/dev/null | tr '\n' ' ')
if [ -n "$csvs" ]; then
  step "plot (lab 07's and final's CSV files)"
  if mk/plot.sh --check; then make plot RESULTS="$csvs" 2>&1 | tee "$OUT/plot.log"
  else echo "plot: skipped: no Python with matplotlib on this host (the CSV/JSON files are in $OUT; make plot RESULTS=... elsewhere)"; fi
fi
fi
# MCCL_FAULTS=1: final/tests/nccl/nccl_faults on 2 GPUs, each case on minccl's drop-in and on NCCL's library
# (LD_LIBRARY_PATH picks it): a peer's SIGKILL, the three mismatched calls (minccl's watchdog at
# MCCL_FAULTS_WATCHDOG_MS, default 2000), and the abort after each; a library sees nothing within
# MCCL_FAULTS_WAIT_MS (default 5000) is reported so.
nf=build/cuda/bin/final/nccl_faults
if [ "${MCCL_FAULTS:-0}" = 1 ] && [ -x "$nf" ] && [ "$ngpu" -ge 2 ]; then
  step "faults: nccl_faults on minccl and NCCL, 2 GPUs"
  for c in kill count function missing; do
    for l in minccl NCCL; do
      case $l in minccl) ld=$PWD/build/cuda/lib ;; NCCL) ld=$(dirname "${MCCL_NCCL_LIB:-/nonexistent/x}") ;; esac
      rec=""; [ $c = kill ] && rec="--enable-recovery --mca orte_allowed_exit_without_sync 1"
      # shellcheck disable=SC2086 # mpi and rec are lists
      LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" MCCL_WATCHDOG_TIMEOUT=${MCCL_FAULTS_WATCHDOG_MS:-2000} \
        timeout 90 $mpi $rec -x LD_LIBRARY_PATH -x MCCL_WATCHDOG_TIMEOUT -x NCCL_NVLS_ENABLE -np 2 "$nf" $c \
        "${MCCL_FAULTS_WAIT_MS:-5000}" > "$OUT/faults_${c}_$l.log" 2>&1
      echo "$c on $l: exit $?"; grep '^# rank' "$OUT/faults_${c}_$l.log" | cut -c1-300
    done
  done
fi
# MCCL_DEVAPI=1: final/tests/nccl/mpi_nccl_devapi, a program built against NCCL's nccl.h and nccl_device.h alone,
# on minccl's drop-in and on NCCL's library (LD_LIBRARY_PATH picks it), MCCL_NP ranks: its tests, then its
# timings (--bench: the device-API allreduce kernel from 8 B to 64 MiB, eager and in a CUDA graph; the fused
# allreduce + RMSNorm against ncclAllReduce + the same RMSNorm, bf16, in a graph), then both side by side.
# MCCL_DEVAPI_BENCH="..." passes other --bench arguments (e.g. "allreduce --graph --iters 50").
nd=build/cuda/bin/final/mpi_nccl_devapi
if [ "${MCCL_DEVAPI:-0}" = 1 ] && [ -x "$nd" ] && [ "$ngpu" -ge 2 ]; then
  step "device API: mpi_nccl_devapi's tests and timings on minccl and NCCL, $np ranks"
  for l in minccl NCCL; do
    case $l in minccl) ld=$PWD/build/cuda/lib ;; NCCL) ld=$(dirname "${MCCL_NCCL_LIB:-/nonexistent/x}") ;; esac
    # shellcheck disable=SC2086 # mr and MCCL_DEVAPI_BENCH are lists
    LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 240 $mr -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
      "$nd" > "$OUT/devapi_test_$l.log" 2>&1
    echo "tests on $l: exit $?"; grep -E '^(FAIL|SKIP)|passed,|^# library' "$OUT/devapi_test_$l.log"
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 240 $mr -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
      "$nd" --bench ${MCCL_DEVAPI_BENCH:-} > "$OUT/devapi_bench_$l.log" 2>&1
    echo "timings on $l: exit $?"
  done
  # The allreduce rows (size, eager, graph) and the RMSNorm rows (rows, hidden, fused, fused LL, unfused) of both
  # runs; the bar's ratio takes minccl's faster fused kernel.
  awk 'FNR == 1 { f++ } $1 ~ /^[0-9]+$/ && NF == 6 && $2 * 4 == $1 { k = "ar " $1; e[f, k] = $3; g[f, k] = $4; if (f == 1) o[++n] = k }
       $1 ~ /^[0-9]+$/ && NF == 7 { k = "rms " $1 " " $2; fu[f, k] = ($4 > 0 && $4 < $3 ? $4 : $3); fb[f, k] = $3 "/" $4; un[f, k] = $5; if (f == 1) o[++n] = k }
       END { print "#  what              minccl eager/graph (us)   NCCL eager/graph (us)   graph NCCL/minccl"
             for (i = 1; i <= n; i++) { k = o[i]
               if (k ~ /^ar/) printf "%-18s %11s %11s %11s %11s %8.3f\n", k, e[1, k], g[1, k], e[2, k], g[2, k], (g[1, k] > 0 ? g[2, k] / g[1, k] : 0)
               else printf "%-18s fused/LL %s unfused %s (minccl)   fused/LL %s unfused %s (NCCL): NCCL unfused / minccl fused %.2fx\n", k, fb[1, k], un[1, k], fb[2, k], un[2, k], (fu[1, k] > 0 ? un[2, k] / fu[1, k] : 0) } }' \
    "$OUT/devapi_bench_minccl.log" "$OUT/devapi_bench_NCCL.log" | tee "$OUT/devapi_compare.txt"
fi
if [ "${MCCL_DROPIN:-0}" = 1 ] && [ "$ngpu" -ge 2 ]; then
  step "drop-in: nccl-tests on minccl and on NCCL"
  timeout "${MCCL_NCCL_TESTS_TIMEOUT:-300}" mk/nccl-tests.sh NCCL_TESTS_SRC="${NCCL_TESTS_SRC:-third_party/nccl-tests}" \
    OUT="$OUT/nccl-tests" NP="$np" > "$OUT/nccl-tests.log" 2>&1
  echo "nccl-tests exit $?"; tail -40 "$OUT/nccl-tests.log"
  step "drop-in: PyTorch (torchrun --nproc_per_node $np, libnccl.so.2 preloaded)"
  LD_PRELOAD=$PWD/build/cuda/lib/libnccl.so.2 timeout "${MCCL_TORCH_TIMEOUT:-150}" \
    torchrun --nproc_per_node "$np" final/tests/torch_dropin.py > "$OUT/torch.log" 2>&1
  echo "torch exit $?"; grep -vE '^\[rank|^W[0-9]' "$OUT/torch.log" | tail -25
fi
# MCCL_TORCH_BENCH=1: PyTorch's all_reduce on tensors from its caching allocator, whole and as odd views, 64 KiB to
# 256 MiB, float32 and bfloat16 (final/tests/torch_allreduce_bench.py), with the drop-in preloaded and on torch's own
# NCCL, MCCL_NP ranks; one table: time per call of each and NCCL's over minccl's.
if [ "${MCCL_TORCH_BENCH:-0}" = 1 ] && [ "$ngpu" -ge 2 ]; then
  step "PyTorch all_reduce timed: drop-in and torch's NCCL, $np ranks"
  make -j16 BACKEND=cuda ${NCCL_INCLUDE:+NCCL_INCLUDE=$NCCL_INCLUDE} build/cuda/lib/libnccl.so > /dev/null 2>&1
  LD_PRELOAD=$PWD/build/cuda/lib/libnccl.so.2 timeout 200 torchrun --nproc_per_node "$np" \
    final/tests/torch_allreduce_bench.py > "$OUT/torch_bench.minccl.log" 2>&1
  em=$?
  timeout 200 torchrun --nproc_per_node "$np" final/tests/torch_allreduce_bench.py > "$OUT/torch_bench.nccl.log" 2>&1
  echo "exit minccl $em NCCL $?; $(grep -h '^# library' "$OUT"/torch_bench.*.log | tr '\n' ';')"
  awk 'FNR == 1 { f++ } $1 == "allreduce" { k = $2 " " $3 " " $4; t[f, k] = $5; if (f == 1) o[++n] = k }
       END { printf "%-28s %10s %10s %7s\n", "dtype bytes view", "minccl us", "NCCL us", "ratio"
             for (i = 1; i <= n; i++) { k = o[i]
               printf "%-28s %10s %10s %7.2f\n", k, t[1, k], t[2, k], (t[1, k] > 0 ? t[2, k] / t[1, k] : 0) } }' \
    "$OUT/torch_bench.minccl.log" "$OUT/torch_bench.nccl.log" | tee "$OUT/torch_bench.txt"
  grep -h 'WRONG\|wrong' "$OUT"/torch_bench.*.log
fi
# MCCL_NET=1: the net path beside NCCL's: the two processes pose as two hosts (allreduce_perf
# --hosts 2: MCCL_HOSTID and NCCL_HOSTID), so minccl's ring runs over lab 08's NET transport (the MPI
# plugin) and NCCL over its network (NCCL_NET, default Socket). With one GPU both ranks share it, and
# the step starts an MPS daemon of its own for the run (two processes' kernels cannot overlap without
# it, and each rank's kernel waits on the other's), stopped after; MCCL_NET_MPS=0 leaves MPS out.
if [ "${MCCL_NET:-0}" = 1 ] && [ -x build/cuda/bin/final/allreduce_perf ]; then
  step "net path: allreduce_perf --hosts 2 --nccl (minccl: NET over Open MPI; NCCL: NCCL_NET=${MCCL_NET_NCCL:-Socket})"
  mpsdir=""
  if [ "$ngpu" -lt 2 ] && [ "${MCCL_NET_MPS:-1}" = 1 ]; then
    if command -v nvidia-cuda-mps-control >/dev/null; then
      mpsdir=$(mktemp -d)
      export CUDA_MPS_PIPE_DIRECTORY=$mpsdir/pipe CUDA_MPS_LOG_DIRECTORY=$mpsdir/log
      mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
      nvidia-cuda-mps-control -d && echo "MPS daemon started (one GPU, two ranks)" || { echo "MPS did not start"; mpsdir=""; }
    else echo "one GPU and no nvidia-cuda-mps-control: the ranks time-slice the GPU (figures not comparable)"; fi
  fi
  # Two ranks posing as two hosts, whatever MCCL_NP says.
  # shellcheck disable=SC2086 # mpi is a list
  NCCL_NET=${MCCL_NET_NCCL:-Socket} timeout "${MCCL_NET_TIMEOUT:-300}" $mpi -np 2 -x NCCL_NET -x NCCL_NVLS_ENABLE \
    ${mpsdir:+-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY} build/cuda/bin/final/allreduce_perf --hosts 2 --nccl \
    -b 8 -e "${MCCL_NET_MAX:-512M}" -f 2 ${MCCL_NET_ARGS:-} --progress --csv "$OUT/allreduce_perf_net.csv" \
    --json "$OUT/allreduce_perf_net.json" > "$OUT/allreduce_perf_net.log" 2>&1
  echo "net exit $?"; grep -vE 'MCCL INFO|NCCL INFO' "$OUT/allreduce_perf_net.log" | tail -34
  if [ -n "$mpsdir" ]; then
    echo quit | nvidia-cuda-mps-control; sleep 1; cp -r "$CUDA_MPS_LOG_DIRECTORY" "$OUT/mps-log" 2>/dev/null
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; rm -rf "$mpsdir"
  fi
fi
# MCCL_AB_BASE="DIR ...": A/B of final's allreduce_perf against the source trees of other commits, one per
# DIR (ignored folders carried to the host: `git archive <commit> | tar -x -C third_party/ab-x`, the hash
# in DIR/COMMIT). Each is built; then MCCL_AB_ROUNDS rounds (default 3), each running every DIR and then
# this tree ("new") in turn, eager and -G 20, -b 8 -e MCCL_AB_MAX (default 256K), NCCL's rows beside
# them in every run; the summary lists each run's 8 B and 8 KiB times. Logs and CSV: $OUT/ab/.
if [ -n "${MCCL_AB_BASE:-}" ] && [ "${MCCL_AB_ALLREDUCE:-1}" = 1 ] && [ "$ngpu" -ge 2 ]; then
  step "A/B: allreduce_perf of $MCCL_AB_BASE and this tree (new)"
  mkdir -p "$OUT/ab"
  for d in $MCCL_AB_BASE; do
    echo "$(basename "$d"): commit $(cat "$d/COMMIT" 2>/dev/null || echo '?')"
    make -C "$d" -j16 BACKEND=cuda build/cuda/bin/final/allreduce_perf > "$OUT/ab/$(basename "$d")-build.log" 2>&1 ||
      echo "$d: build FAILED: $(grep -m3 error "$OUT/ab/$(basename "$d")-build.log")"
  done
  for r in $(seq "${MCCL_AB_ROUNDS:-3}"); do
    for d in $MCCL_AB_BASE .; do
      v=$(basename "$d"); [ "$d" = . ] && v=new
      for run in eager graph; do
        case $run in eager) args="" ;; graph) args="-G 20" ;; esac
        log="$OUT/ab/${v}_${run}_$r.log"
        # shellcheck disable=SC2086 # mr and args are lists
        $mr "$d/build/cuda/bin/final/allreduce_perf" --nccl -b 8 -e "${MCCL_AB_MAX:-256K}" -f 2 $args \
          --csv "${log%.log}.csv" > "$log" 2>&1
        echo "round $r $v $run (exit $?): $(small_times "$log")"
      done
    done
  done
fi
# MCCL_AB_NCCL_TESTS="broadcast_perf reduce_perf ...": the same A/B through nccl-tests on the drop-in: each
# MCCL_AB_BASE tree's libnccl.so.2, this tree's ("new") and NCCL's (MCCL_NCCL_LIB), MCCL_AB_ROUNDS rounds
# (default 3, each in turn within a round); the summary lists each run's sizes: out-of-place / in-place time,
# busbw and #wrong (nt_run's runs). MCCL_AB_ALLREDUCE=0 leaves out the allreduce_perf A/B above. Logs: $OUT/ab-nt/.
if [ -n "${MCCL_AB_BASE:-}" ] && [ -n "${MCCL_AB_NCCL_TESTS:-}" ] && [ "$ngpu" -ge 2 ]; then
  step "A/B through nccl-tests ($MCCL_AB_NCCL_TESTS): $MCCL_AB_BASE and this tree (new)"
  mkdir -p "$OUT/ab-nt"
  for d in $MCCL_AB_BASE .; do
    make -C "$d" -j16 BACKEND=cuda ${NCCL_INCLUDE:+NCCL_INCLUDE=$NCCL_INCLUDE} build/cuda/lib/libnccl.so \
      > "$OUT/ab-nt/$(basename "$(cd "$d" && pwd)")-dropin-build.log" 2>&1 || echo "$d: drop-in build FAILED"
  done
  for r in $(seq "${MCCL_AB_ROUNDS:-3}"); do
    for t in $MCCL_AB_NCCL_TESTS; do
      for d in $MCCL_AB_BASE .; do
        v=$(basename "$d"); [ "$d" = . ] && v=new
        log="$OUT/ab-nt/${v}_${t}_$r.log"
        nt_run "$(cd "$d" && pwd)/build/cuda/lib" "$t" "$log"
        echo "round $r $v $t (exit $?): $(nt_rows "$log")"
      done
      if [ -n "${MCCL_NCCL_LIB:-}" ]; then  # NCCL's rows in the same round
        log="$OUT/ab-nt/nccl_${t}_$r.log"
        nt_run "$(dirname "$MCCL_NCCL_LIB")" "$t" "$log"
        echo "round $r nccl $t (exit $?): $(nt_rows "$log")"
      fi
    done
  done
fi
# MCCL_SWEEP="VAR=v1,v2,...": final's allreduce_perf (eager and -G 20, -b MCCL_SWEEP_MIN (default 8) -e
# MCCL_SWEEP_MAX (default 256K) -f MCCL_SWEEP_F (default 2), NCCL's rows beside) once per value of the
# environment variable VAR, MCCL_AB_ROUNDS rounds (default 3, the values in turn within a round); the summary
# lists each run's 8 B and 8 KiB times and its busbw from 1 MiB up (big_rows). MCCL_SWEEP_ARGS adds arguments
# (--oop for MCCL_ALGO=ce, which refuses in-place buffers). $OUT/sweep/.
if [ -n "${MCCL_SWEEP:-}" ] && [ "$ngpu" -ge 2 ]; then
  step "sweep: allreduce_perf over $MCCL_SWEEP"
  mkdir -p "$OUT/sweep"
  var=${MCCL_SWEEP%%=*}
  for r in $(seq "${MCCL_AB_ROUNDS:-3}"); do
    for val in $(echo "${MCCL_SWEEP#*=}" | tr , ' '); do
      for run in eager graph; do
        case $run in eager) args="" ;; graph) args="-G 20" ;; esac
        log="$OUT/sweep/${var}_${val}_${run}_$r.log"
        # shellcheck disable=SC2086 # mr and args are lists
        env "$var=$val" $mr -x "$var" build/cuda/bin/final/allreduce_perf --nccl -b "${MCCL_SWEEP_MIN:-8}" \
          -e "${MCCL_SWEEP_MAX:-256K}" -f "${MCCL_SWEEP_F:-2}" $args ${MCCL_SWEEP_ARGS:-} --csv "${log%.log}.csv" > "$log" 2>&1
        echo "round $r $var=$val $run (exit $?): $(small_times "$log")$(big_rows "$log")"
      done
    done
  done
fi
# MCCL_NT_SWEEP="VAR=v1,v2,...[;VAR2=...]": nccl-tests (MCCL_NT_TESTS, default "broadcast_perf sendrecv_perf")
# on this tree's drop-in once per value of each variable, MCCL_AB_ROUNDS rounds (default 3, the values in
# turn within a round), -b MCCL_AB_NT_MIN -e MCCL_AB_NT_MAX -f 4 as the A/B above; the summary lists each
# run's sizes (busbw out-of-place / in-place, #wrong); MCCL_NT_NCCL=1 adds NCCL's run of each test in each
# round. Logs: $OUT/nt-sweep/.
if [ -n "${MCCL_NT_SWEEP:-}" ] && [ "$ngpu" -ge 2 ]; then
  step "sweep through nccl-tests: $MCCL_NT_SWEEP"
  mkdir -p "$OUT/nt-sweep"
  make -j16 BACKEND=cuda ${NCCL_INCLUDE:+NCCL_INCLUDE=$NCCL_INCLUDE} build/cuda/lib/libnccl.so > /dev/null 2>&1
  IFS=';' read -r -a ntvars <<< "$MCCL_NT_SWEEP"
  for sv in "${ntvars[@]}"; do
    var=${sv%%=*}
    for r in $(seq "${MCCL_AB_ROUNDS:-3}"); do
      for t in ${MCCL_NT_TESTS:-broadcast_perf sendrecv_perf}; do
        IFS=',' read -r -a vals <<< "${sv#*=}"  # a value may hold spaces (MCCL_THREAD_THRESHOLDS=8 8 64)
        for val in "${vals[@]}"; do
          log="$OUT/nt-sweep/${var}_${val// /_}_${t}_$r.log"
          nt_run "$PWD/build/cuda/lib" "$t" "$log" "$var=$val"
          echo "round $r $var=$val $t (exit $?): $(nt_rows "$log")"
        done
        if [ "${MCCL_NT_NCCL:-0}" = 1 ] && [ -n "${MCCL_NCCL_LIB:-}" ]; then
          log="$OUT/nt-sweep/nccl_${t}_$r.log"
          nt_run "$(dirname "$MCCL_NCCL_LIB")" "$t" "$log"
          echo "round $r nccl $t (exit $?): $(nt_rows "$log")"
        fi
      done
    done
  done
fi
# MCCL_NT_BARS=1: nccl-tests' MCCL_NT_BARS_TESTS (default all_reduce_perf all_gather_perf reduce_scatter_perf) on
# this tree's drop-in and on NCCL (MCCL_NCCL_LIB), MCCL_NP ranks, -b MCCL_AB_NT_MIN -e MCCL_AB_NT_MAX -f 4 as nt_run,
# once per argument set of MCCL_NT_BARS_ARGS (sets separated by ';', default ";-u 1": aligned buffers, then
# buffers offset by one element; "-C 1 -b 16K -e 1M" reports the host's time per call instead). One table per
# test and set: size, out-of-place time (us) and busbw (GB/s) of each library, and NCCL's time over minccl's.
# Logs: $OUT/nt-bars/.
nt_compare() {  # MINCCL_LOG NCCL_LOG
  awk 'FNR == 1 { f++ } $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 12 { t[f, $1] = $6; b[f, $1] = $8; if (f == 1) o[++n] = $1 }
       END { printf "%12s %10s %10s %9s %9s %7s\n", "bytes", "minccl us", "NCCL us", "minccl bw", "NCCL bw", "ratio"
             for (i = 1; i <= n; i++) { k = o[i]
               printf "%12s %10s %10s %9s %9s %7.2f\n", k, t[1, k], t[2, k], b[1, k], b[2, k], (t[1, k] > 0 ? t[2, k] / t[1, k] : 0) } }' "$1" "$2"
}
if [ "${MCCL_NT_BARS:-0}" = 1 ] && [ "$ngpu" -ge 2 ] && [ -n "${MCCL_NCCL_LIB:-}" ]; then
  step "nccl-tests bars: minccl and NCCL, $np ranks (${MCCL_NT_BARS_ARGS-;-u 1})"
  mkdir -p "$OUT/nt-bars"
  make -j16 BACKEND=cuda ${NCCL_INCLUDE:+NCCL_INCLUDE=$NCCL_INCLUDE} build/cuda/lib/libnccl.so > /dev/null 2>&1
  IFS=';' read -r -a ntargs <<< "${MCCL_NT_BARS_ARGS-;-u 1}"
  for a in "${ntargs[@]}"; do
    for t in ${MCCL_NT_BARS_TESTS:-all_reduce_perf all_gather_perf reduce_scatter_perf}; do
      tag="${t%_perf}$(echo "$a" | tr -c 'A-Za-z0-9\n' _)"
      MCCL_AB_NT_ARGS="$a" nt_run "$PWD/build/cuda/lib" "$t" "$OUT/nt-bars/$tag.minccl.log"
      em=$?
      MCCL_AB_NT_ARGS="$a" nt_run "$(dirname "$MCCL_NCCL_LIB")" "$t" "$OUT/nt-bars/$tag.nccl.log"
      echo "$t ${a:-(aligned)}: exit minccl $em NCCL $?"
      nt_compare "$OUT/nt-bars/$tag.minccl.log" "$OUT/nt-bars/$tag.nccl.log" | tee "$OUT/nt-bars/$tag.txt"
    done
  done
fi
# MCCL_SHARED_GPU=1: with fewer GPUs than ranks, several ranks on one (P2P within a device): correctness only, never
# timing, since the ranks' kernels take turns on a GPU (nccl-tests refuses more ranks than GPUs, so it is left out).
# Lab 07's test_coll and test_enqueue and lab 10's test_ce with MCCL_TEST_RANKS_PER_GPU=2 (the unaligned,
# shifted-slice and one-shot AllGather / ReduceScatter cases among them), the test_coll cases of
# MCCL_SHARED_SANITIZE (default "shiftedSlices oneShotGathers") under compute-sanitizer memcheck and racecheck, then
# mpi_nccl_devapi's tests on the drop-in, MCCL_NP ranks (both fused RMSNorm kernels). Logs: $OUT/shared/.
if [ "${MCCL_SHARED_GPU:-0}" = 1 ]; then
  step "shared GPU: ranks sharing $ngpu GPU(s): lab 07's in-process cases, sanitizers, mpi_nccl_devapi's tests"
  mkdir -p "$OUT/shared"
  b7=build/cuda/bin/07_allreduce
  for t in 07_allreduce/test_coll 07_allreduce/test_enqueue 10_copy_engines/test_ce; do
    MCCL_TEST_RANKS_PER_GPU=2 timeout 200 "build/cuda/bin/$t" > "$OUT/shared/${t##*/}.log" 2>&1
    echo "$t (2 ranks per GPU): exit $?"; grep -E '^(FAIL|SKIP)|passed,' "$OUT/shared/${t##*/}.log"
  done
  for c in ${MCCL_SHARED_SANITIZE:-shiftedSlices oneShotGathers}; do
    for tool in memcheck racecheck; do
      MCCL_TEST_RANKS_PER_GPU=2 MCCL_TEST_FILTER=$c timeout 150 compute-sanitizer --tool $tool \
        --report-api-errors no --error-exitcode 9 "$b7/test_coll" > "$OUT/shared/sanitizer-$c-$tool.log" 2>&1
      echo "test_coll.$c under $tool: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/shared/sanitizer-$c-$tool.log" | tr -s ' '))"
    done
  done
  if [ -x "$nd" ]; then
    # shellcheck disable=SC2086 # mr is a list
    LD_LIBRARY_PATH="$PWD/build/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 240 $mr -x LD_LIBRARY_PATH \
      -x NCCL_NVLS_ENABLE "$nd" > "$OUT/shared/devapi_test.log" 2>&1
    echo "mpi_nccl_devapi's tests: exit $?"; grep -E '^(FAIL|SKIP)|passed,' "$OUT/shared/devapi_test.log"
  fi
fi
# MCCL_CE=1: lab 10's benchmark on MCCL_NP GPUs: AllGather and AlltoAll on the kernels, on minccl's copy engines
# and on NCCL's (CTAPolicy ZERO) from 1 MiB to 512 MiB per rank, then --overlap (an FMA kernel on every SM beside
# a 256 MiB AllGather, each path). MCCL_CE_ARGS adds arguments to the sweep.
bce=build/cuda/bin/10_copy_engines/mpi_bench_ce
if [ "${MCCL_CE:-0}" = 1 ] && [ -x "$bce" ] && [ "$ngpu" -ge 2 ]; then
  step "copy engines: mpi_bench_ce sweep and --overlap, $np ranks"
  # shellcheck disable=SC2086 # mr and MCCL_CE_ARGS are lists
  timeout 240 $mr -x NCCL_NVLS_ENABLE -x MCCL_NCCL_LIB "$bce" ${MCCL_CE_ARGS:-} > "$OUT/ce_sweep.log" 2>&1
  echo "sweep exit $?"; grep -vE 'MCCL INFO|NCCL INFO' "$OUT/ce_sweep.log" | tail -30
  # shellcheck disable=SC2086
  timeout 180 $mr -x NCCL_NVLS_ENABLE -x MCCL_NCCL_LIB "$bce" --overlap > "$OUT/ce_overlap.log" 2>&1
  echo "overlap exit $?"; grep -vE 'MCCL INFO|NCCL INFO' "$OUT/ce_overlap.log" | tail -16
fi
# MCCL_CE_AR=1: lab 10's copy-engine-assisted allreduce (MCCL_ALGO=ce) beside two-shot and NCCL, allreduce_perf
# --oop on windows, eager, MCCL_NP ranks, from MCCL_CE_AR_MIN (64M) to 1G with the default chunk (four rounds a call),
# then each chunk of MCCL_CE_AR_CHUNKS (default "16777216 67108864") at 256 MiB and 1 GiB.
bf=build/cuda/bin/final/allreduce_perf
if [ "${MCCL_CE_AR:-0}" = 1 ] && [ -x "$bf" ] && [ "$ngpu" -ge 2 ]; then
  step "copy-engine-assisted allreduce: allreduce_perf --oop, MCCL_ALGO=ce / twoshot beside NCCL, $np ranks"
  for algo in ce twoshot; do
    # shellcheck disable=SC2086 # mr is a list
    MCCL_ALGO=$algo $mr -x MCCL_ALGO "$bf" --nccl --oop -b "${MCCL_CE_AR_MIN:-64M}" -e 1G -f 2 \
      > "$OUT/ce_ar_$algo.log" 2>&1
    echo "MCCL_ALGO=$algo exit $?"; grep -E '^ *[0-9]+ ' "$OUT/ce_ar_$algo.log" | tail -8
  done
  for chunk in ${MCCL_CE_AR_CHUNKS-16777216 67108864}; do
    # shellcheck disable=SC2086 # mr is a list
    MCCL_ALGO=ce MCCL_CE_AR_CHUNK=$chunk $mr -x MCCL_ALGO -x MCCL_CE_AR_CHUNK "$bf" --oop -b 256M -e 1G -f 4 \
      > "$OUT/ce_ar_chunk$chunk.log" 2>&1
    echo "MCCL_CE_AR_CHUNK=$chunk exit $?"; grep -E '^ *[0-9]+ ' "$OUT/ce_ar_chunk$chunk.log" | tail -2
  done
  # The reduce kernel's blocks (MCCL_CE_AR_BLOCKS; default a block per 4 SMs): MCCL_CE_AR_NBLOCKS, default "8 16".
  for nb in ${MCCL_CE_AR_NBLOCKS-8 16}; do
    # shellcheck disable=SC2086 # mr is a list
    MCCL_ALGO=ce MCCL_CE_AR_BLOCKS=$nb $mr -x MCCL_ALGO -x MCCL_CE_AR_BLOCKS "$bf" --oop -b 256M -e 1G -f 4 \
      > "$OUT/ce_ar_blocks$nb.log" 2>&1
    echo "MCCL_CE_AR_BLOCKS=$nb exit $?"; grep -E '^ *[0-9]+ ' "$OUT/ce_ar_blocks$nb.log" | tail -2
  done
fi
if [ "${MCCL_PROFILE:-0}" = 1 ] && [ "$ngpu" -ge 2 ] && command -v ncu >/dev/null; then
  step "profile: kernel durations under ncu (minccl and NCCL, $np ranks, ${MCCL_PROFILE_SIZES:-8 8K 2M})"
  MCCL_NP=$np timeout "${MCCL_PROFILE_TIMEOUT:-200}" mk/gpu-profile.sh "$OUT/profile" ${MCCL_PROFILE_SIZES:-8 8K 2M} 2>&1 | tee "$OUT/profile.log" | tail -30
fi
step done
