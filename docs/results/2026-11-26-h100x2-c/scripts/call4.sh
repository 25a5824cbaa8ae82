#!/usr/bin/env bash
# call 4: the committed state (1 MiB ring FIFO + 32 KiB slice floor + lab 06 bench -c 64): benches, then GPU tests
set -u
OUT=${OUT:-$PWD/gpu-out}
export NCCL_NVLS_ENABLE=0 MCCL_TEST_TIMEOUT=240
export MCCL_NCCL_LIB=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')/lib/libnccl.so.2
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: ${MCCL_COMMIT:-?}"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv; nvidia-smi topo -m
  echo "nvcc: $(nvcc --version | tail -1)"; echo "mpirun: $(mpirun --version | head -1)"; echo "NCCL library: $MCCL_NCCL_LIB"; echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"; } > $OUT/env.txt 2>&1
head -4 $OUT/env.txt
make -k -j16 BACKEND=cuda all > "$OUT/build.log" 2>&1 || { echo BUILD FAILED; grep error $OUT/build.log | head; }
echo "######## final allreduce_perf eager ($SECONDS s)"
timeout 90 $mpi -np 2 -x NCCL_NVLS_ENABLE build/cuda/bin/final/allreduce_perf --nccl -b 8 -e 1G -f 2 --csv $OUT/allreduce_perf_eager.csv > $OUT/allreduce_perf_eager.log 2>&1; echo "exit $?"; tail -9 $OUT/allreduce_perf_eager.log
echo "######## lab 07 --tune 16M..512M ($SECONDS s)"
timeout 90 $mpi -np 2 -x NCCL_NVLS_ENABLE build/cuda/bin/07_allreduce/mpi_bench_allreduce --tune -b 16M -e 512M > $OUT/bench07_tune.log 2>&1; echo "exit $?"; grep -vE "^#" $OUT/bench07_tune.log | tail -30
echo "######## lab 06 bench bar rows ($SECONDS s)"
timeout 90 $mpi -np 2 -x NCCL_NVLS_ENABLE -x MCCL_NCCL_LIB build/cuda/bin/06_device_kernels/mpi_bench_prims -b 8 -e 8 --sweep-channels 32,64 --sweep-threads 512 > $OUT/bench06.log 2>&1; echo "exit $?"; tail -12 $OUT/bench06.log
echo "######## net path ($SECONDS s)"
NCCL_NET=Socket timeout 150 $mpi -np 2 -x NCCL_NET -x NCCL_NVLS_ENABLE build/cuda/bin/final/allreduce_perf --hosts 2 --nccl -b 8 -e 512M -f 8 --csv $OUT/allreduce_perf_net.csv > $OUT/allreduce_perf_net.log 2>&1; echo "exit $?"; grep -vE 'MCCL INFO|NCCL INFO' $OUT/allreduce_perf_net.log | tail -16
echo "######## tests ($SECONDS s)"
for l in 06 07 final; do timeout 200 make BACKEND=cuda test LAB=$l 2>&1; done | tee $OUT/test.log | grep -E '^(FAIL|SKIP)|^[0-9]+ passed,'
echo "######## done ($SECONDS s)"
cd "$OUT" && tar czf /tmp/gpu-run.tgz . && find . -mindepth 1 -delete && mv /tmp/gpu-run.tgz .
