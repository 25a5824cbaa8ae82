#!/usr/bin/env bash
# One-GPU experiment: compute-sanitizer synccheck on the primitives' named barriers, aligned (new) vs
# barrier.sync (old), ranks sharing the GPU. Logs under $OUT. As run on 2026-11-24: the old build used a
# temporary switch, MCCL_BARRIER_EXPERIMENT_UNALIGNED, that was never committed (the tree has one barrier form).
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 MCCL_TEST_TIMEOUT=120
T0=$SECONDS
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nvcc --version | tail -1; } > "$OUT/env.txt" 2>&1; cat "$OUT/env.txt"
MR="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none --allow-run-as-root"
B="build/cuda/bin"
BINS="$B/06_device_kernels/mpi_prims $B/07_allreduce/mpi_sendrecv $B/07_allreduce/mpi_allreduce $B/07_allreduce/mpi_coll"
echo "## build new (aligned) $((SECONDS-T0))s"
make -j16 BACKEND=cuda $BINS > "$OUT/build-new.log" 2>&1; echo "build new rc $?"; tail -3 "$OUT/build-new.log"
echo "## build old (barrier.sync) $((SECONDS-T0))s"
make -j16 BACKEND=cuda BUILD_ROOT=build-old NVCC="nvcc -DMCCL_BARRIER_EXPERIMENT_UNALIGNED" build-old/cuda/bin/07_allreduce/mpi_sendrecv > "$OUT/build-old.log" 2>&1 & bpid=$!
sc() {  # name, variant dir, filter, binary
  local name=$1 bin=$2 filt=$3
  MCCL_TEST_FILTER=$filt timeout 100 $MR -np 2 -x MCCL_TEST_FILTER -x NCCL_NVLS_ENABLE compute-sanitizer --tool synccheck --print-limit 40 "$bin" > "$OUT/sync-$name.log" 2>&1
  echo "synccheck $name: rc $? errors: $(grep -c 'Barrier error' "$OUT/sync-$name.log") summary: $(grep -E 'ERROR SUMMARY' "$OUT/sync-$name.log" | tr '\n' ' ') tests: $(grep -E '^(PASS|FAIL)' "$OUT/sync-$name.log" | tr '\n' ' ' | cut -c1-300)"
}
echo "## synccheck new $((SECONDS-T0))s"
sc new-sendrecv "$B/07_allreduce/mpi_sendrecv" outOfOrderPeers
sc new-prims "$B/06_device_kernels/mpi_prims" moveP2p
sc new-allreduce "$B/07_allreduce/mpi_allreduce" "" 
wait $bpid; echo "build old rc $?"; tail -2 "$OUT/build-old.log"
echo "## synccheck old $((SECONDS-T0))s"
sc old-sendrecv "build-old/cuda/bin/07_allreduce/mpi_sendrecv" outOfOrderPeers
echo "## tests new, no tool $((SECONDS-T0))s"
for t in "07_allreduce/mpi_sendrecv 2" "07_allreduce/mpi_sendrecv 3" "07_allreduce/mpi_allreduce 2" "07_allreduce/mpi_allreduce 4" "07_allreduce/mpi_coll 3" "06_device_kernels/mpi_prims 2"; do
  set -- $t
  n=$(basename $1)-np$2
  timeout 150 $MR -np $2 -x NCCL_NVLS_ENABLE $B/$1 > "$OUT/test-$n.log" 2>&1
  echo "test $n: rc $? $(grep -E 'passed,' "$OUT/test-$n.log" | tail -1) $(grep -E '^FAIL' "$OUT/test-$n.log" | head -3 | tr '\n' ' ')"
done
echo "## done $((SECONDS-T0))s"
