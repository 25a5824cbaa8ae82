#!/usr/bin/env bash
# Experiment: minccl's NET path on one GPU (MPS), channel count and mpirun's yield setting.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
make -j16 BACKEND=cuda all > "$OUT/build.log" 2>&1 || { echo build failed; tail "$OUT/build.log"; exit 1; }
export NCCL_NVLS_ENABLE=0
mpsdir=$(mktemp -d); export CUDA_MPS_PIPE_DIRECTORY=$mpsdir/pipe CUDA_MPS_LOG_DIRECTORY=$mpsdir/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d
b=build/cuda/bin/final/allreduce_perf
run() { # name, mpirun extra, bench args
  local n=$1; shift; local extra=$1; shift
  timeout 120 mpirun --allow-run-as-root --bind-to none $extra -np 2 -x CUDA_MPS_PIPE_DIRECTORY -x MCCL_NCHANNELS -x NCCL_NET $b --hosts 2 "$@" > "$OUT/$n.log" 2>&1
  echo "== $n (exit $?)"; grep -E '^ +[0-9]' "$OUT/$n.log" | awk '{printf "%s %s oop %s ip %s busbw %s\n",$1,$6,$7,$11,$9}'
}
for ch in 1 2 4 8 32; do MCCL_NCHANNELS=$ch run ch$ch "--oversubscribe" -b 8 -e 512M -f 8 -n 20 -w 3; done
MCCL_NCHANNELS=2 run ch2-noyield "" -b 8 -e 512M -f 8 -n 20 -w 3
for ch in 1 2 4 8 32; do MCCL_NCHANNELS=$ch run big$ch "--oversubscribe" -b 512M -e 512M -n 5 -w 1; done
echo quit | nvidia-cuda-mps-control
