#!/usr/bin/env bash
# session 2026-11-27 call 6 (2 GPUs): eager small sizes, main (5bdd089, third_party/ab-main) against the tree
# (cb26936 + docs), allreduce_perf --nccl -b 8 -e 8K -f 2, 4 rounds in turn; then -G 20 once each.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/s6"; O=$OUT/s6
trap 'cd "$OUT" && tar czf /tmp/s6.tgz s6 && rm -rf s6 && mv /tmp/s6.tgz .' EXIT
export NCCL_NVLS_ENABLE=0
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none --allow-run-as-root -x NCCL_NVLS_ENABLE"
make -C third_party/ab-main -j8 BACKEND=cuda build/cuda/bin/final/allreduce_perf > $O/build-main.log 2>&1 &
make -j8 BACKEND=cuda build/cuda/bin/final/allreduce_perf > $O/build.log 2>&1; wait; echo "built ($SECONDS s)"
for r in 1 2 3 4; do for v in main new; do
  bin=build/cuda/bin/final/allreduce_perf; [ $v = main ] && bin=third_party/ab-main/$bin
  $mpi -np 2 $bin --nccl -b 8 -e 8K -f 2 > $O/${v}_eager_$r.log 2>&1
  echo "$r $v: $(grep -E '^# 8 B - 8 KiB, eager' $O/${v}_eager_$r.log | cut -c1-100) | $(awk '$1 ~ /^[0-9]+$/ && $6=="minccl" {printf "%s/%s ", $7, $11}' $O/${v}_eager_$r.log)"
done; done
for v in main new; do
  bin=build/cuda/bin/final/allreduce_perf; [ $v = main ] && bin=third_party/ab-main/$bin
  $mpi -np 2 $bin --nccl -b 8 -e 8K -f 2 -G 20 > $O/${v}_graph.log 2>&1
  echo "graph $v: $(awk '$1 ~ /^[0-9]+$/ && $6=="minccl" {printf "%s/%s ", $7, $11}' $O/${v}_graph.log)"
done
echo "done ($SECONDS s)"
