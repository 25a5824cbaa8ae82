#!/usr/bin/env bash
# Kernel durations of minccl's and NCCL's allreduce on 2 GPUs (MCCL_NP=4: 4), under Nsight Compute.
#
#   mk/gpu-profile.sh OUTDIR SIZE... (e.g. 8 8K 2M; BACKEND=cuda build of final/bench/allreduce_perf)
#
# For each size, final's allreduce_perf runs under mpirun -np MCCL_NP (default 2) with --nccl -R 2 (NCCL default,
# NCCL symmetric, minccl on the same buffers), rank 0 inside ncu with one single-pass metric,
# gpu__time_duration.sum (no kernel replay: a replayed kernel would wait for a peer that does not
# replay), --clock-control none, --cache-control none. The other ranks run without the profiler, so they
# are ahead: rank 0's kernels mostly find their peer's data already there, and the durations are a
# kernel's own cost (launch to exit on the GPU) without waiting for the peer. Compare them with the
# benchmark's time per call: the difference is what happens between kernels (host launch, gaps).
# Writes OUTDIR/ncu-SIZE.csv (ncu's raw CSV), OUTDIR/allreduce_perf-SIZE.log and prints one table:
# size, kernel, grid x block, launches, median and minimum duration in microseconds.
#
# MCCL_PROFILE_BENCH picks another program (default allreduce, the above):
#   prims     lab 06's mpi_bench_prims, 2 ranks, -b SIZE -e SIZE (P2P first, then SHM), the rank
#             MCCL_PROFILE_RANK (default 0: the sender of the one-way rows, 1: the receiver) inside ncu for
#             its first MCCL_PROFILE_LAUNCHES kernels (default 640: the P2P table's, ours and NCCL's). The
#             table splits each kernel's launches into the one-way rows' (the first (w + n) * batch of the
#             bench's -w, -n, --batch) and the rest (both ways, where the rank runs a send and a receive kernel).
#   sendrecv  nccl-tests' sendrecv_perf (build/cuda/nccl-tests, mk/nccl-tests.sh BUILD_ONLY=1) at SIZE, -n 5
#             -w 1, on the drop-in (build/cuda/lib) and on NCCL (NCCL_LIB_DIR, default the lib/ of python's
#             nvidia.nccl, as mk/nccl-tests.sh): rank 0's kernels, with
#             the grid (channels) and block each library chose.
#   all_reduce, all_gather, reduce_scatter  the same with that nccl-tests program, MCCL_NP ranks.
#   devapi    final's mpi_nccl_devapi --bench allreduce --graph --iters 20 --max SIZE (its device-API allreduce
#             kernel, the same source on both libraries, from 8 B to SIZE) on the drop-in and on NCCL, MCCL_NP
#             ranks: whether a difference between them lies in the kernel (the memory it reaches) or around it.
set -uo pipefail
out=${1:?usage: mk/gpu-profile.sh OUTDIR SIZE...}
shift
[ $# -gt 0 ] || { echo "gpu-profile.sh: no sizes given" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
what=${MCCL_PROFILE_BENCH:-allreduce}
case $what in
  allreduce) bin=$root/build/cuda/bin/final/allreduce_perf ;;
  prims) bin=$root/build/cuda/bin/06_device_kernels/mpi_bench_prims ;;
  sendrecv | all_reduce | all_gather | reduce_scatter) bin=$root/build/cuda/nccl-tests/${what}_perf ;;
  devapi) bin=$root/build/cuda/bin/final/mpi_nccl_devapi ;;
  *) echo "gpu-profile.sh: MCCL_PROFILE_BENCH=$what (allreduce, prims, sendrecv, all_reduce, all_gather, reduce_scatter or devapi)" >&2; exit 2 ;;
esac
[ -x "$bin" ] || { echo "gpu-profile.sh: $bin not built (make BACKEND=cuda all; nccl-tests: mk/nccl-tests.sh BUILD_ONLY=1)" >&2; exit 2; }
command -v ncu >/dev/null || { echo "gpu-profile.sh: no ncu on PATH" >&2; exit 2; }
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
mr="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none -x NCCL_NVLS_ENABLE"
[ "$(id -u)" = 0 ] && mr="$mr --allow-run-as-root"
status=0
np=${MCCL_NP:-2}
case $what in prims | sendrecv) np=2 ;; esac  # lab 06's bench and send/recv: two ranks
primsWarm=1 primsIters=3 primsBatch=20  # prims: per row, (warm + iters) * batch launches of each kernel
if { [ "$bin" != "${bin%_perf}" ] || [ "$what" = devapi ]; } && [ -z "${NCCL_LIB_DIR:-}" ]; then
  NCCL_LIB_DIR=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)/lib
fi
# prof RANK CSV LOG [ncu options] -- COMMAND...: COMMAND under mpirun, rank RANK inside ncu.
prof() {
  local r=$1 csv=$2 log=$3
  shift 3
  local ncuopts=()
  while [ "$1" != -- ]; do ncuopts+=("$1"); shift; done
  shift
  # shellcheck disable=SC2016 # expanded by each rank's shell
  $mr -np "$np" -x LD_LIBRARY_PATH sh -c 'r=$1 csv=$2 n=$3; shift 3; if [ "$OMPI_COMM_WORLD_RANK" = "$r" ]; then exec ncu --clock-control none \
      --cache-control none --metrics gpu__time_duration.sum --csv --print-units base --log-file "$csv" $n "$@"; else exec "$@"; fi' \
    sh "$r" "$csv" "${ncuopts[*]:-}" "$@" > "$log" 2>&1
}
for size in "$@"; do
  case $what in
    allreduce)
      prof 0 "$out/ncu-$size.csv" "$out/allreduce_perf-$size.log" -- "$bin" -b "$size" -e "$size" -n 20 -w 5 -c 0 -R 2 --nccl ;;
    prims)
      prof "${MCCL_PROFILE_RANK:-0}" "$out/ncu-$size.csv" "$out/mpi_bench_prims-$size.log" --launch-count "${MCCL_PROFILE_LAUNCHES:-640}" -- \
        "$bin" -b "$size" -e "$size" -n "$primsIters" -w "$primsWarm" --batch "$primsBatch" --p2p-bytes "$size" --shm-bytes "$size" --sweep-channels 1 --sweep-threads 256 ;;
    devapi)  # the same program on the drop-in, then on NCCL
      # shellcheck disable=SC2030,SC2031 # each run its own library path
      (export LD_LIBRARY_PATH=$root/build/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        prof 0 "$out/ncu-$size.csv" "$out/devapi-minccl-$size.log" -- "$bin" --bench allreduce --graph --iters 20 --max "$size") &&
        (export LD_LIBRARY_PATH=$NCCL_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
          prof 0 "$out/ncu-nccl-$size.csv" "$out/devapi-nccl-$size.log" -- "$bin" --bench allreduce --graph --iters 20 --max "$size") ;;
    *)  # nccl-tests: the drop-in, then NCCL
      # shellcheck disable=SC2030,SC2031 # each run its own library path
      (export LD_LIBRARY_PATH=$root/build/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        prof 0 "$out/ncu-$size.csv" "$out/${what}_perf-minccl-$size.log" -- "$bin" -b "$size" -e "$size" -n 5 -w 1 -g 1 -c 1) &&
        (export LD_LIBRARY_PATH=$NCCL_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
          prof 0 "$out/ncu-nccl-$size.csv" "$out/${what}_perf-nccl-$size.log" -- "$bin" -b "$size" -e "$size" -n 5 -w 1 -g 1 -c 1) ;;
  esac || { echo "gpu-profile.sh: $what size $size: exit $? (see the logs in $out)"; status=1; }
done
python3 - "$out" "$what" "$(((primsWarm + primsIters) * primsBatch))" "$@" <<'PY'
import csv, os, statistics, sys
out, what, oneway, sizes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
print(f"{'size':>6}  {'kernel':<58} {'grid x block':>24} {'n':>4} {'median us':>10} {'min us':>8}")
def show(size, path, tag=""):
    if not os.path.exists(path):
        print(f"{size:>6}  (no profile: {os.path.basename(path)})")
        return
    lines = [l for l in open(path) if l.startswith('"')]
    rows = {}
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = (tag + r["Kernel Name"].split("(")[0])[:58]
        key = (name, f"{r['Grid Size']} x {r['Block Size']}")
        rows.setdefault(key, []).append(float(r["Metric Value"].replace(",", "")) / 1000.0)
    for (name, shape), v in rows.items():
        parts = [("", v)]
        if what == "prims" and len(v) > oneway:
            parts = [(" [one way]", v[:oneway]), (" [both ways]", v[oneway:])]
        for label, x in parts:
            print(f"{size:>6}  {(name + label)[:58]:<58} {shape:>24} {len(x):>4} {statistics.median(x):>10.2f} {min(x):>8.2f}")
for size in sizes:
    nt = what not in ("allreduce", "prims")  # nccl-tests: the drop-in's run and NCCL's
    show(size, os.path.join(out, f"ncu-{size}.csv"), "minccl drop-in: " if nt else "")
    if nt:
        show(size, os.path.join(out, f"ncu-nccl-{size}.csv"), "NCCL: ")
PY
exit $status
