#!/usr/bin/env bash
# call 2 (4 GPUs): issue 12's bars (final allreduce_perf --nccl eager and -G 20, 4 ranks), lab 07 --tune
# at 4 ranks, then the 512 MiB ring: 512 vs 640 threads per block, MCCL_BUFFSIZE 1/2/4 MiB (2 rounds).
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/c2"; O=$OUT/c2
trap 'cd "$OUT" && tar czf /tmp/c2.tgz c2 && rm -rf c2 && mv /tmp/c2.tgz .' EXIT
export NCCL_NVLS_ENABLE=0
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2 NCCL_INCLUDE=$d/include NCCL_LIB_DIR=$d/lib
export MCCL_COMMIT
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $MCCL_COMMIT"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv; nvidia-smi topo -m
  echo "nvcc: $(nvcc --version | tail -1)"; echo "mpirun: $(mpirun --version | head -1)"; echo "NCCL library: $MCCL_NCCL_LIB"; echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"; } > $O/env.txt 2>&1
echo "######## build ($SECONDS s)"
make -C third_party/ab-t640 -j6 BACKEND=cuda build/cuda/bin/final/allreduce_perf > $O/build-t640.log 2>&1 &
make -k -j12 BACKEND=cuda build/cuda/bin/final/allreduce_perf build/cuda/bin/07_allreduce/mpi_bench_allreduce > $O/build.log 2>&1 || { echo BUILD FAILED; grep error $O/build.log | head; }
wait; echo "built ($SECONDS s)"
bf=build/cuda/bin/final/allreduce_perf
for run in eager graph; do
  case $run in eager) args="" ;; graph) args="-G 20" ;; esac
  echo "######## final allreduce_perf $run ($SECONDS s)"
  timeout 120 $mpi -np 4 -x NCCL_NVLS_ENABLE -x MCCL_NCCL_LIB -x MCCL_COMMIT $bf --nccl -b 8 -e 1G -f 2 $args --csv $O/allreduce_perf_$run.csv --json $O/allreduce_perf_$run.json > $O/allreduce_perf_$run.log 2>&1
  echo "exit $?"; grep -E "^ +(8|16|32|64|128|256|512|1024|2048|4096|8192|2097152|33554432|536870912) " $O/allreduce_perf_$run.log | head -40
done
echo "######## lab 07 --tune np4 ($SECONDS s)"
timeout 150 $mpi -np 4 -x NCCL_NVLS_ENABLE build/cuda/bin/07_allreduce/mpi_bench_allreduce --tune --csv $O/tune4.csv > $O/tune4.log 2>&1; echo "exit $?"; tail -12 $O/tune4.log
echo "######## 512 MiB ring: threads and FIFO ($SECONDS s)"
for r in 1 2; do
  for v in main:1048576 t640:1048576 main:2097152 main:4194304; do
    tree=${v%%:*} b=${v#*:}; bin=$bf; [ $tree = t640 ] && bin=third_party/ab-t640/$bf
    log=$O/ring_${tree}_${b}_$r.log
    MCCL_BUFFSIZE=$b timeout 60 $mpi -np 4 -x NCCL_NVLS_ENABLE -x MCCL_BUFFSIZE $bin -b 64M -e 512M -f 2 > $log 2>&1
    echo "round $r $tree BUFFSIZE=$b exit $?: $(awk '$1 ~ /^[0-9]+$/ && $1 >= 67108864 && NF > 8 { printf "%s %s/%s; ", $1, $9, $13 }' $log)"
  done
done
echo "######## done ($SECONDS s)"
