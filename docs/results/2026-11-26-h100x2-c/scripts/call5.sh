#!/usr/bin/env bash
# call 5: issue 10's bars with the new table (eager + graph), NET 512 MiB and 8 B with 1 MiB vs 4 MiB FIFO
set -u
OUT=${OUT:-$PWD/gpu-out}
export NCCL_NVLS_ENABLE=0
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $MCCL_COMMIT"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv; nvidia-smi topo -m
  echo "nvcc: $(nvcc --version | tail -1)"; echo "mpirun: $(mpirun --version | head -1)"; echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"; } > $OUT/env.txt 2>&1
make -j16 BACKEND=cuda build/cuda/bin/final/allreduce_perf build/cuda/lib/libmccl-net-mpi.so > "$OUT/build.log" 2>&1 || { echo BUILD FAILED; grep error $OUT/build.log | head; }
for run in eager graph; do
  case $run in eager) args="" ;; graph) args="-G 20" ;; esac
  echo "######## final allreduce_perf $run ($SECONDS s)"
  timeout 100 $mpi -np 2 -x NCCL_NVLS_ENABLE build/cuda/bin/final/allreduce_perf --nccl -b 8 -e 1G -f 2 $args --csv $OUT/allreduce_perf_$run.csv --json $OUT/allreduce_perf_$run.json > $OUT/allreduce_perf_$run.log 2>&1; echo "exit $?"; tail -9 $OUT/allreduce_perf_$run.log
done
for b in 1048576 4194304; do for sz in 8 512M; do
  echo "######## net MCCL_BUFFSIZE=$b size $sz ($SECONDS s)"
  MCCL_BUFFSIZE=$b NCCL_NET=Socket timeout 80 $mpi -np 2 -x NCCL_NET -x NCCL_NVLS_ENABLE -x MCCL_BUFFSIZE build/cuda/bin/final/allreduce_perf --hosts 2 --nccl -b $sz -e $sz > $OUT/net_${b}_$sz.log 2>&1; echo "exit $?"
  grep -E "^ +[0-9]+ " $OUT/net_${b}_$sz.log | tail -2
done; done
echo "######## done ($SECONDS s)"
cd "$OUT" && tar czf /tmp/gpu-run.tgz . && find . -mindepth 1 -delete && mv /tmp/gpu-run.tgz .
