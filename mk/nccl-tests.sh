#!/usr/bin/env bash
# NVIDIA's nccl-tests, unmodified, on minccl's libnccl.so.2 and then on NCCL, in one call.
#
#   mk/nccl-tests.sh NCCL_TESTS_SRC=<nccl-tests checkout> [NCCL_LIB_DIR=<dir of NCCL's libnccl.so.2>]
#                    [OUT=<log dir>] [BACKEND=cuda] [NP=2] [BUILD_ONLY=1]
# (each VAR=value may also come from the environment). It
#   1. builds the drop-in (make BACKEND=cuda build/cuda/lib/libnccl.so),
#   2. builds nccl-tests with MPI=1 against nccl.h (NCCL_INCLUDE, default $CUDA_HOME/include) and the
#      drop-in's directory, out of tree (BUILDDIR=build/<backend>/nccl-tests; the checkout is not written),
#   3. runs all_reduce_perf, all_gather_perf, reduce_scatter_perf, broadcast_perf, reduce_perf,
#      sendrecv_perf, alltoall_perf, alltoallv_perf, gather_perf and scatter_perf with -b 8 -e 1G -f 2 -g 1
#      -c 1 under mpirun -np 2; all_reduce_perf also with -R 2 (symmetric registration) and -G 20 (CUDA
#      graphs); all_reduce_perf and reduce_scatter_perf with -d all -o all (every type and operation, fp8
#      and PreMulSum included) up to 64M; all_reduce_perf -b 8K -e 8K -G 20 with -m 8 (a group of eight
#      8 KiB allreduces per iteration) and -m 1: first with LD_LIBRARY_PATH on the drop-in, then on
#      NCCL's library (NCCL_LIB_DIR; default: the lib/ of python3's nvidia.nccl package),
#   4. writes each run's log and summary.md (size, out-of-place time and busbw minccl vs NCCL, #wrong;
#      the time per allreduce in a group of eight beside one alone) under OUT (default ./nccl-tests-out)
#      and prints the summary.
# NCCL_NVLS_ENABLE=0 for every run. A minccl run must print minccl's banner (the drop-in served it)
# and an NCCL run must not. Exit status: 0 when every run finished with #wrong 0 everywhere.
# nccl-tests' kernels are CUDA (nvcc, the CUDA runtime): they need BACKEND=cuda and a GPU. On a
# machine without one, BUILD_ONLY=1 stops after step 2 (a compile and link check).
set -uo pipefail
for a in "$@"; do
  case "$a" in
    *=*) export "${a%%=*}=${a#*=}" ;;
    -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "nccl-tests.sh: unknown argument '$a' (VAR=value expected; --help)" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
: "${NCCL_TESTS_SRC:?NCCL_TESTS_SRC=<path to an NVIDIA/nccl-tests checkout> is required}"
[ -f "$NCCL_TESTS_SRC/src/all_reduce.cu" ] || { echo "nccl-tests.sh: $NCCL_TESTS_SRC is not an nccl-tests checkout" >&2; exit 2; }
NCCL_TESTS_SRC=$(cd "$NCCL_TESTS_SRC" && pwd)
BACKEND=${BACKEND:-cuda}
NP=${NP:-2}
OUT=${OUT:-$root/nccl-tests-out}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")}
NCCL_INCLUDE=${NCCL_INCLUDE:-$CUDA_HOME/include}
MPIRUN=${MPIRUN:-mpirun}
export NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"

# 1. the drop-in
make --no-print-directory BACKEND="$BACKEND" CUDA_HOME="$CUDA_HOME" NCCL_INCLUDE="$NCCL_INCLUDE" -j"$(nproc)" \
  "build/$BACKEND/lib/libnccl.so" > "$OUT/build-minccl.log" 2>&1 ||
  { tail -20 "$OUT/build-minccl.log"; echo "nccl-tests.sh: building the drop-in failed ($OUT/build-minccl.log)" >&2; exit 1; }
dropin=$root/build/$BACKEND/lib

# 2. nccl-tests, against nccl.h and the drop-in's directory (NCCL_HOME/{include,lib}).
home=$root/build/$BACKEND/nccl-tests-home
mkdir -p "$home"
ln -sfn "$NCCL_INCLUDE" "$home/include"
ln -sfn "$dropin" "$home/lib"
mpiinc=$(mpicc --showme:incdirs 2>/dev/null | awk '{print $1}')
MPI_HOME=${MPI_HOME:-$(dirname "${mpiinc:-/usr/include/mpi}")}
bindir=$root/build/$BACKEND/nccl-tests
make -C "$NCCL_TESTS_SRC/src" -j"$(nproc)" MPI=1 MPI_HOME="$MPI_HOME" NCCL_HOME="$home" CUDA_HOME="$CUDA_HOME" \
  BUILDDIR="$bindir" NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" \
  > "$OUT/build-nccl-tests.log" 2>&1 ||
  { tail -20 "$OUT/build-nccl-tests.log"; echo "nccl-tests.sh: building nccl-tests failed ($OUT/build-nccl-tests.log)" >&2; exit 1; }
echo "nccl-tests built in $bindir (against $NCCL_INCLUDE/nccl.h and $dropin)"
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0

if [ -z "${NCCL_LIB_DIR:-}" ]; then
  NCCL_LIB_DIR=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)/lib
fi
[ -f "$NCCL_LIB_DIR/libnccl.so.2" ] || echo "nccl-tests.sh: no NCCL at NCCL_LIB_DIR=$NCCL_LIB_DIR: only minccl runs" >&2

# 3. the runs: name, binary, extra arguments (after the defaults: nccl-tests takes the last of a
# repeated flag, so -b and -e here narrow the sizes)
runs=(
  "all_reduce all_reduce_perf"
  "all_reduce_R2 all_reduce_perf -R 2"
  "all_reduce_G20 all_reduce_perf -G 20"
  "all_gather all_gather_perf"
  "reduce_scatter reduce_scatter_perf"
  "broadcast broadcast_perf"
  "reduce reduce_perf"
  "sendrecv sendrecv_perf"
  "alltoall alltoall_perf"
  "alltoallv alltoallv_perf"
  "gather gather_perf"
  "scatter scatter_perf"
  "all_reduce_all_types_ops all_reduce_perf -d all -o all -b 8 -e 64M"
  "reduce_scatter_all_types_ops reduce_scatter_perf -d all -o all -b 8 -e 64M"
  "all_reduce_group8 all_reduce_perf -b 8K -e 8K -m 8 -G 20"
  "all_reduce_group1 all_reduce_perf -b 8K -e 8K -m 1 -G 20"
)
mpiflags=(--bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
[ "$(id -u)" = 0 ] && mpiflags+=(--allow-run-as-root)
rc=0
run() {  # lib label name binary args...
  local lib=$1 label=$2 name=$3 bin=$4
  shift 4
  local log=$OUT/$label-$name.log
  echo "== $label: $bin -b 8 -e 1G -f 2 -g 1 -c 1 $* (np $NP)"
  LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout "${NCCL_TESTS_TIMEOUT:-900}" \
    "$MPIRUN" "${mpiflags[@]}" -np "$NP" "$bindir/$bin" -b 8 -e 1G -f 2 -g 1 -c 1 "$@" > "$log" 2>&1
  local st=$?
  local served=0
  grep -q 'minccl .* serves this process' "$log" && served=1
  if [ "$label" = minccl ] && [ "$served" = 0 ]; then echo "   NOT served by minccl (no banner in $log)"; rc=1; fi
  if [ "$label" = nccl ] && [ "$served" = 1 ]; then echo "   served by minccl, not NCCL ($log)"; rc=1; fi
  if [ "$st" -ne 0 ]; then echo "   exit status $st ($log)"; tail -5 "$log" | sed 's/^/   /'; rc=1; fi
}
for r in "${runs[@]}"; do
  set -- $r
  run "$dropin" minccl "$@"
done
if [ -f "$NCCL_LIB_DIR/libnccl.so.2" ]; then
  for r in "${runs[@]}"; do
    set -- $r
    run "$NCCL_LIB_DIR" nccl "$@"
  done
fi

# 4. the table: per run and size (and type, operation and root where a run has several), out-of-place
# time and busbw of both and #wrong (out + in place) of both; then the group comparison: the time per allreduce
# of a group of eight (-m 8; nccl-tests divides by the group's size) beside one alone (-m 1).
python3 - "$OUT" "${runs[@]}" > "$OUT/summary.md" <<'EOF'
import os, re, sys
out, runs = sys.argv[1], [r.split()[0] for r in sys.argv[2:]]
def parse(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) >= 12 and f[0].isdigit() and f[1].isdigit():
            # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
            try:
                t = float(f[5]); busbw = float(f[7]); wrong = [int(x) if x.isdigit() else x for x in (f[8], f[-1])]
            except ValueError:
                continue
            rows[(f[2], f[3], f[4], int(f[0]))] = (t, busbw, wrong)  # -d all -o all: a row per type and op
    return rows
bad = 0
fmt = lambda b: "-" if b is None else f"{b:.2f}"
print("# nccl-tests: minccl's libnccl.so.2 beside NCCL\n")
for name in runs:
    m, n = parse(f"{out}/minccl-{name}.log"), parse(f"{out}/nccl-{name}.log")
    keys = sorted(set(m) | set(n))
    several = len({k[:3] for k in keys}) > 1  # name the type, operation and root only where they vary
    print(f"## {name}\n\n| size (B){' | type | redop | root' if several else ''} | time minccl (us) | time NCCL (us) |"
          " busbw minccl (GB/s) | busbw NCCL (GB/s) | ratio | #wrong minccl | #wrong NCCL |")
    print("| ---: |" + (" :--- | :--- | ---: |" if several else "") + " ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    if not m:
        print("| (no results: see the log) | | | | | | | |"); bad = 1
    for key in keys:
        mt, mb, mw = m.get(key, (None, None, ["-"]))
        nt, nb, nw = n.get(key, (None, None, ["-"]))
        ratio = f"{mb / nb:.2f}" if mb is not None and nb else "-"
        if any(w not in (0, "N/A") for w in mw if w != "-"):
            bad = 1
        what = f"{key[3]} | {key[0]} | {key[1]} | {key[2]}" if several else f"{key[3]}"
        print(f"| {what} | {fmt(mt)} | {fmt(nt)} | {fmt(mb)} | {fmt(nb)} | {ratio} | {'/'.join(map(str, mw))} | {'/'.join(map(str, nw))} |")
    print()
# The group comparison: out-of-place time per allreduce at 8 KiB, in a group of eight and alone.
def per_call(label, name):
    rows = parse(f"{out}/{label}-{name}.log")
    return next(iter(rows.values()))[0] if rows else None
print("## group of eight 8 KiB allreduces (time per allreduce, us)\n\n| library | -m 8 (group of eight) | -m 1 (alone) |"
      " alone / grouped |\n| :--- | ---: | ---: | ---: |")
for label in ("minccl", "nccl"):
    g, one = per_call(label, "all_reduce_group8"), per_call(label, "all_reduce_group1")
    if label == "minccl" and (g is None or one is None):
        bad = 1
    gain = f"{one / g:.2f}" if g and one else "-"
    print(f"| {label} | {fmt(g)} | {fmt(one)} | {gain} |")
print()
sys.exit(bad)
EOF
[ $? -eq 0 ] || { echo "nccl-tests.sh: wrong results or missing rows (see $OUT/summary.md)"; rc=1; }
cat "$OUT/summary.md"
exit $rc
