#!/usr/bin/env bash
# session 2026-11-27 call 4 (2 GPUs) at MCCL_COMMIT: issue 10's bars (final's allreduce_perf --nccl -b 8 -e 1G
# -f 2, eager and -G 20, CSV/JSON), issue 11's clients (mk/nccl-tests.sh on the drop-in and NCCL, the PyTorch
# script), then final's tests (make test LAB=final) in the time left. Packed into $OUT/s4.tgz.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/s4"; O=$OUT/s4
trap 'cd "$OUT" && tar czf /tmp/s4.tgz s4 && rm -rf s4 && mv /tmp/s4.tgz .' EXIT
export NCCL_NVLS_ENABLE=0 MCCL_TEST_TIMEOUT=200
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2 NCCL_INCLUDE=$d/include NCCL_LIB_DIR=$d/lib
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot -x NCCL_NVLS_ENABLE"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: ${MCCL_COMMIT:-?}"; nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv; nvidia-smi topo -m; nvcc --version | tail -1; mpirun --version | head -1; echo "NCCL $MCCL_NCCL_LIB"; echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"; } > $O/env.txt 2>&1; head -4 $O/env.txt
echo "######## build ($SECONDS s)"
make -k -j16 BACKEND=cuda all > $O/build.log 2>&1 || { echo BUILD FAILED; grep error $O/build.log | head; }
make -j16 BACKEND=cuda build/cuda/lib/libnccl.so > $O/build-dropin.log 2>&1 || echo "drop-in build FAILED"
echo "######## allreduce_perf ($SECONDS s)"
for run in eager graph; do
  args=""; [ $run = graph ] && args="-G 20"
  timeout 150 $mpi -np 2 build/cuda/bin/final/allreduce_perf --nccl -b 8 -e 1G -f 2 $args --progress \
    --csv $O/allreduce_perf_$run.csv --json $O/allreduce_perf_$run.json > $O/allreduce_perf_$run.log 2>&1
  echo "$run exit $? ($SECONDS s)"; grep -E "^# (8 B|2 MiB|32 MiB|512 MiB|data)" $O/allreduce_perf_$run.log
done
echo "######## drop-in: nccl-tests ($SECONDS s)"
timeout 330 mk/nccl-tests.sh NCCL_TESTS_SRC=third_party/nccl-tests OUT=$O/nccl-tests NP=2 > $O/nccl-tests.log 2>&1
echo "nccl-tests exit $? ($SECONDS s)"; tail -32 $O/nccl-tests.log
echo "######## drop-in: PyTorch ($SECONDS s)"
LD_PRELOAD=$PWD/build/cuda/lib/libnccl.so.2 timeout 120 torchrun --nproc_per_node 2 final/tests/torch_dropin.py > $O/torch.log 2>&1
echo "torch exit $? ($SECONDS s)"; grep -vE '^\[rank|^W[0-9]' $O/torch.log | tail -6
left=$((590 - SECONDS))
echo "######## final tests, ${left} s left ($SECONDS s)"
if [ $left -gt 60 ]; then timeout $left make BACKEND=cuda test LAB=final > $O/test-final.log 2>&1; echo "exit $?"; grep -E '^(FAIL|SKIP)|passed,' $O/test-final.log | tail -8; fi
echo "######## done ($SECONDS s)"
