#!/usr/bin/env bash
# call 3: ring FIFO 4M (main) vs 1M (main, env) vs 1M + 32 KiB slice floor (ab-floor, env); lab 06 threads sweep
set -u
OUT=${OUT:-$PWD/gpu-out}
export NCCL_NVLS_ENABLE=0
export MCCL_NCCL_LIB=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')/lib/libnccl.so.2
ninc=$(dirname "$(dirname "$MCCL_NCCL_LIB")")/include
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
F=third_party/ab-floor
tgts="build/cuda/lib/libnccl.so build/cuda/bin/final/allreduce_perf build/cuda/bin/07_allreduce/mpi_bench_allreduce build/cuda/bin/06_device_kernels/mpi_bench_prims"
( make -j8 BACKEND=cuda NCCL_INCLUDE=$ninc $tgts > "$OUT/build-main.log" 2>&1 || echo main build failed ) &
( make -C $F -j8 BACKEND=cuda NCCL_INCLUDE=$ninc $tgts > "$OUT/build-floor.log" 2>&1 || echo floor build failed ) &
wait
NCCL_INCLUDE=$ninc mk/nccl-tests.sh NCCL_TESTS_SRC=third_party/nccl-tests OUT="$OUT" BUILD_ONLY=1 > "$OUT/build-nt.log" 2>&1 || echo nt build failed
echo "######## built ($SECONDS s)"
nt() { # tree test log bufsize
  LD_LIBRARY_PATH=$PWD/$1/build/cuda/lib MCCL_BUFFSIZE=$4 $mpi -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x MCCL_BUFFSIZE \
    build/cuda/nccl-tests/$2 -b 2M -e 512M -f 4 -g 1 -c 1 > $3 2>&1
  echo "$(basename $3 .log): $(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 12 { printf "%s %s/%s us %s/%s GB/s w%s; ", $1, $6, $10, $8, $12, $9+$13 }' $3)"
}
for r in 1 2; do
  for t in all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf; do
    nt . $t $OUT/main4M_${t}_$r.log 4194304
    nt . $t $OUT/main1M_${t}_$r.log 1048576
    nt $F $t $OUT/floor1M_${t}_$r.log 1048576
  done
done
echo "######## allreduce_perf + shm ($SECONDS s)"
for v in main4M:.:4194304 main1M:.:1048576 floor1M:$F:1048576; do
  IFS=: read n d b <<< "$v"
  MCCL_BUFFSIZE=$b $mpi -np 2 -x NCCL_NVLS_ENABLE -x MCCL_BUFFSIZE $d/build/cuda/bin/final/allreduce_perf -b 1M -e 512M -f 4 > $OUT/ar_$n.log 2>&1
  echo "ar $n: $(awk '$1 ~ /^[0-9]+$/ && $6 == "minccl" { printf "%s %s/%s; ", $1, $9, $13 }' $OUT/ar_$n.log)"
  MCCL_BUFFSIZE=$b $mpi -np 2 -x NCCL_NVLS_ENABLE -x MCCL_BUFFSIZE -x MCCL_NCCL_LIB $d/build/cuda/bin/07_allreduce/mpi_bench_allreduce --shm -b 128M > $OUT/shm_$n.log 2>&1
  echo "shm $n:"; tail -4 $OUT/shm_$n.log
done
echo "######## lab 06 threads sweep ($SECONDS s)"
$mpi -np 2 -x NCCL_NVLS_ENABLE -x MCCL_NCCL_LIB build/cuda/bin/06_device_kernels/mpi_bench_prims -b 512M -e 512M --shm-bytes 64M --sweep-channels 48,64 --sweep-threads 256,384,512,640,768,1024 > $OUT/prims_threads.log 2>&1
grep -E "^P2P|best|P2P 512" $OUT/prims_threads.log
echo "######## done ($SECONDS s)"
cd "$OUT" && tar czf /tmp/gpu-run.tgz . && find . -mindepth 1 -delete && mv /tmp/gpu-run.tgz .
