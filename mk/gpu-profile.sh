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
set -uo pipefail
out=${1:?usage: mk/gpu-profile.sh OUTDIR SIZE...}
shift
[ $# -gt 0 ] || { echo "gpu-profile.sh: no sizes given" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/cuda/bin/final/allreduce_perf
[ -x "$bin" ] || { echo "gpu-profile.sh: $bin not built (make BACKEND=cuda all)" >&2; exit 2; }
command -v ncu >/dev/null || { echo "gpu-profile.sh: no ncu on PATH" >&2; exit 2; }
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
mr="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none -x NCCL_NVLS_ENABLE"
[ "$(id -u)" = 0 ] && mr="$mr --allow-run-as-root"
status=0
for size in "$@"; do
  csv=$out/ncu-$size.csv
  # shellcheck disable=SC2016 # expanded by each rank's shell
  $mr -np "${MCCL_NP:-2}" sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec ncu --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum --csv --print-units base --log-file "$0" "$@"; else exec "$@"; fi' \
    "$csv" "$bin" -b "$size" -e "$size" -n 20 -w 5 -c 0 -R 2 --nccl > "$out/allreduce_perf-$size.log" 2>&1 ||
    { echo "gpu-profile.sh: size $size: exit $? (see $out/allreduce_perf-$size.log)"; status=1; }
done
python3 - "$out" "$@" <<'PY'
import csv, os, statistics, sys
out, sizes = sys.argv[1], sys.argv[2:]
print(f"{'size':>6}  {'kernel':<58} {'grid x block':>14} {'n':>4} {'median us':>10} {'min us':>8}")
for size in sizes:
    path = os.path.join(out, f"ncu-{size}.csv")
    if not os.path.exists(path):
        print(f"{size:>6}  (no profile)")
        continue
    lines = [l for l in open(path) if l.startswith('"')]
    rows = {}
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = r["Kernel Name"].split("(")[0][:58]
        key = (name, f"{r['Grid Size']} x {r['Block Size']}")
        rows.setdefault(key, []).append(float(r["Metric Value"].replace(",", "")) / 1000.0)
    for (name, shape), v in rows.items():
        print(f"{size:>6}  {name:<58} {shape:>14} {len(v):>4} {statistics.median(v):>10.2f} {min(v):>8.2f}")
PY
exit $status
