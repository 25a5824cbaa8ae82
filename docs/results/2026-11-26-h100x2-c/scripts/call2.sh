#!/usr/bin/env bash
# call 2: racecheck hazard detail on main; ring allreduce FIFO sweep; lab 06 bench FIFO sweep
set -u
OUT=${OUT:-$PWD/gpu-out}
export NCCL_NVLS_ENABLE=0
export MCCL_NCCL_LIB=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')/lib/libnccl.so.2
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
make -j16 BACKEND=cuda all > "$OUT/build.log" 2>&1 || echo build failed
echo "######## racecheck detail ($SECONDS s)"
MCCL_TEST_FILTER=Layouts timeout 200 $mpi -np 2 -x NCCL_NVLS_ENABLE -x MCCL_TEST_FILTER \
  compute-sanitizer --tool racecheck --racecheck-report hazard --report-api-errors no --print-limit 4000 \
  build/cuda/bin/07_allreduce/mpi_sendrecv > "$OUT/racecheck-detail.log" 2>&1
echo "exit $? lines $(wc -l < "$OUT/racecheck-detail.log")"
echo "######## ring allreduce FIFO sweep ($SECONDS s)"
for r in 1 2; do for b in 524288 1048576 2097152 4194304; do
  log=$OUT/ring_${b}_$r.log
  MCCL_ALGO=ring MCCL_BUFFSIZE=$b $mpi -np 2 -x NCCL_NVLS_ENABLE -x MCCL_ALGO -x MCCL_BUFFSIZE build/cuda/bin/final/allreduce_perf --nccl -b 8M -e 512M -f 4 > $log 2>&1
  echo "round $r BUFFSIZE=$b: $(awk '$1 ~ /^[0-9]+$/ && $1 >= 1048576 && $7 ~ /^[0-9.]+$/ { printf "%s %s %s/%s; ", $1, $6, $9, $13 }' $log)"
done; done
echo "######## lab 06 bench FIFO sweep ($SECONDS s)"
for r in 1 2; do for b in 524288 1048576 4194304; do
  log=$OUT/prims_${b}_$r.log
  MCCL_BUFFSIZE=$b timeout 120 $mpi -np 2 -x NCCL_NVLS_ENABLE -x MCCL_BUFFSIZE -x MCCL_NCCL_LIB build/cuda/bin/06_device_kernels/mpi_bench_prims -b 32M -e 512M -f 4 > $log 2>&1
  echo "round $r BUFFSIZE=$b (exit $?):"; tail -10 $log
done; done
echo "######## done ($SECONDS s)"
cd "$OUT" && tar czf /tmp/gpu-run.tgz . && find . -mindepth 1 -delete && mv /tmp/gpu-run.tgz .
