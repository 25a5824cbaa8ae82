#!/usr/bin/env bash
# Experiment: LL over NET (commit fc2f390): lab 08's tests on the GPU, then the net path with minccl's
# protocol forced (MCCL_PROTO=ll / simple) and by its table, beside NCCL (LL by its tuning), one GPU
# shared under MPS, posed as 2 hosts.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
make -j16 BACKEND=cuda all > "$OUT/build.log" 2>&1 || { echo build failed; grep error "$OUT/build.log" | head; exit 1; }
export NCCL_NVLS_ENABLE=0 NCCL_NET=Socket
make BACKEND=cuda test LAB=08 > "$OUT/test08.log" 2>&1; grep -E "^(FAIL)|passed" "$OUT/test08.log"
mpsdir=$(mktemp -d); export CUDA_MPS_PIPE_DIRECTORY=$mpsdir/pipe CUDA_MPS_LOG_DIRECTORY=$mpsdir/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d
b=build/cuda/bin/final/allreduce_perf
run() { # name, then bench args; MCCL_PROTO from the environment
  local n=$1; shift
  timeout 150 mpirun --allow-run-as-root --bind-to none --oversubscribe -np 2 -x CUDA_MPS_PIPE_DIRECTORY -x NCCL_NET \
    -x NCCL_NVLS_ENABLE ${MCCL_PROTO:+-x MCCL_PROTO} $b --hosts 2 "$@" > "$OUT/$n.log" 2>&1
  echo "== $n MCCL_PROTO=${MCCL_PROTO:-table} (exit $?)"
  grep -E '^ +[0-9]' "$OUT/$n.log" | awk '{printf "%10s %-7s oop %9s ip %9s\n",$1,$6,$7,$11}'
}
MCCL_PROTO=ll run ll -b 8 -e 256K -f 4 -n 100 -w 10
MCCL_PROTO=simple run simple -b 8 -e 256K -f 4 -n 100 -w 10
for rep in 1 2; do run table$rep --nccl -b 8 -e 256K -f 4 -n 200 -w 20; done
echo quit | nvidia-cuda-mps-control
