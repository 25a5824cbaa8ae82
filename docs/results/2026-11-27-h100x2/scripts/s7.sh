#!/usr/bin/env bash
# session 2026-11-27 call 7 (2 GPUs): one-shot with SIMPLE in a kernel of its own (the tree): lab 07's
# test_allreduce and mpi_allreduce np2; graph small sizes main (5bdd089) against the tree, 2 rounds; the
# tree's graph 1-4 MiB.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/s7"; O=$OUT/s7
trap 'cd "$OUT" && tar czf /tmp/s7.tgz s7 && rm -rf s7 && mv /tmp/s7.tgz .' EXIT
export NCCL_NVLS_ENABLE=0 MCCL_TEST_TIMEOUT=100
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none --allow-run-as-root -x NCCL_NVLS_ENABLE"
b=build/cuda/bin/07_allreduce
make -C third_party/ab-main -j8 BACKEND=cuda build/cuda/bin/final/allreduce_perf > $O/build-main.log 2>&1 &
make -j10 BACKEND=cuda build/cuda/bin/final/allreduce_perf $b/test_allreduce $b/mpi_allreduce > $O/build.log 2>&1 || echo BUILD FAILED; wait; echo "built ($SECONDS s)"
timeout 60 $b/test_allreduce > $O/test_allreduce.log 2>&1; echo "test_allreduce exit $?: $(tail -1 $O/test_allreduce.log)"
timeout 40 $mpi -np 2 $b/mpi_allreduce > $O/mpi_allreduce.log 2>&1; echo "mpi_allreduce np2 exit $?: $(tail -1 $O/mpi_allreduce.log)"
for r in 1 2; do for v in main new; do
  bin=build/cuda/bin/final/allreduce_perf; [ $v = main ] && bin=third_party/ab-main/$bin
  $mpi -np 2 $bin --nccl -b 8 -e 8K -f 2 -G 20 > $O/${v}_graph_$r.log 2>&1
  echo "graph $r $v: $(awk '$1 ~ /^[0-9]+$/ && $6=="minccl" {printf "%s/%s ", $7, $11}' $O/${v}_graph_$r.log)"
done; done
$mpi -np 2 build/cuda/bin/final/allreduce_perf --nccl -b 512K -e 4M -f 2 -G 20 > $O/new_graph_big.log 2>&1
echo "graph new 512K-4M: $(awk '$1 ~ /^[0-9]+$/ && $6=="minccl" {printf "%s %s/%s us %s GB/s; ", $1, $7, $11, $9}' $O/new_graph_big.log)"
echo "done ($SECONDS s)"
