#!/usr/bin/env bash
# call 4 (4 GPUs): the ceiling probe on 2 GPUs (issue 10's 2-rank bar); small allreduce in a graph at 2, 3, 4
# ranks (the per-peer cost of one-shot, issue 12's graph bar) and MCCL_ONESHOT_BLOCK_BYTES at 4 ranks;
# racecheck on every mpi_sendrecv test (not only connectionAcrossLayouts) at main.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/c4"; O=$OUT/c4
trap 'cd "$OUT" && tar czf /tmp/c4.tgz c4 && rm -rf c4 && mv /tmp/c4.tgz .' EXIT
export NCCL_NVLS_ENABLE=0
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2 NCCL_INCLUDE=$d/include NCCL_LIB_DIR=$d/lib
export MCCL_COMMIT
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $MCCL_COMMIT"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
  echo "nvcc: $(nvcc --version | tail -1)"; echo "mpirun: $(mpirun --version | head -1)"; echo "NCCL library: $MCCL_NCCL_LIB"; echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"; } > $O/env.txt 2>&1
echo "######## build ($SECONDS s)"
make -k -j16 BACKEND=cuda build/cuda/bin/final/allreduce_perf build/cuda/bin/07_allreduce/mpi_sendrecv > $O/build.log 2>&1 || { echo BUILD FAILED; grep error $O/build.log | head; }
nvcc -arch=sm_90 -O3 -std=c++17 -o /tmp/p2pceil third_party/scripts/p2pceil.cu > $O/build-probe.log 2>&1
echo "######## ceiling probe, devices 0 and 1 ($SECONDS s)"
CUDA_VISIBLE_DEVICES=0,1 timeout 60 /tmp/p2pceil > $O/p2pceil-2gpu.log 2>&1; echo "exit $?"; grep -E "^(ce|sm 0->1  64|ring|ringr)" $O/p2pceil-2gpu.log
bf=build/cuda/bin/final/allreduce_perf
small() { awk '$1 ~ /^[0-9]+$/ && ($1 == 8 || $1 == 1024 || $1 == 8192) && $7 ~ /^[0-9.]+$/ { printf "%s %s %s/%s; ", $1, $6, $7, $11 }' "$1"; }
echo "######## graph 8 B - 8 KiB at 2, 3, 4 ranks, 2 rounds ($SECONDS s)"
for r in 1 2; do for np in 2 3 4; do
  log=$O/graph_np${np}_$r.log
  timeout 60 $mpi -np $np -x NCCL_NVLS_ENABLE -x MCCL_NCCL_LIB $bf --nccl -b 8 -e 8K -f 2 -G 20 --csv ${log%.log}.csv > $log 2>&1
  echo "round $r np $np exit $?: $(small $log)"
done; done
echo "######## MCCL_ONESHOT_BLOCK_BYTES at 4 ranks, graph ($SECONDS s)"
for r in 1 2; do for v in 256 512 1024 2048; do
  log=$O/obb_${v}_$r.log
  MCCL_ONESHOT_BLOCK_BYTES=$v timeout 60 $mpi -np 4 -x NCCL_NVLS_ENABLE -x MCCL_ONESHOT_BLOCK_BYTES $bf -b 8 -e 8K -f 2 -G 20 > $log 2>&1
  echo "round $r $v exit $?: $(small $log)"
done; done
echo "######## racecheck, every mpi_sendrecv test, 2 ranks ($SECONDS s)"
timeout 200 $mpi -np 2 -x NCCL_NVLS_ENABLE compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 100000 --report-api-errors no --error-exitcode 9 build/cuda/bin/07_allreduce/mpi_sendrecv > $O/racecheck-sendrecv-all.log 2>&1
echo "exit $? ($(grep -E 'RACECHECK SUMMARY' $O/racecheck-sendrecv-all.log | sort | uniq -c | tr -s ' ' | tr '\n' ';'))"
awk '/Error: Potential/ {n++} /^(PASS|FAIL)/ {print $1, $2, "hazards during it:", n + 0; n = 0}' $O/racecheck-sendrecv-all.log
gzip $O/racecheck-sendrecv-all.log
echo "######## done ($SECONDS s)"
