#!/usr/bin/env bash
# Experiment: the 8 B gap on the net path: NCCL with its protocol forced (Simple vs its default, LL),
# beside minccl's SIMPLE ring (the only protocol minccl's NET proxy moves), one GPU shared under MPS.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
make -j16 BACKEND=cuda all > "$OUT/build.log" 2>&1 || { echo build failed; tail "$OUT/build.log"; exit 1; }
export NCCL_NVLS_ENABLE=0 NCCL_NET=Socket
mpsdir=$(mktemp -d); export CUDA_MPS_PIPE_DIRECTORY=$mpsdir/pipe CUDA_MPS_LOG_DIRECTORY=$mpsdir/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d
b=build/cuda/bin/final/allreduce_perf
run() { # name, then bench args; NCCL_PROTO from the environment
  local n=$1; shift
  timeout 120 mpirun --allow-run-as-root --bind-to none --oversubscribe -np 2 -x CUDA_MPS_PIPE_DIRECTORY -x NCCL_NET \
    -x NCCL_NVLS_ENABLE ${NCCL_PROTO:+-x NCCL_PROTO} $b --hosts 2 --nccl "$@" > "$OUT/$n.log" 2>&1
  echo "== $n NCCL_PROTO=${NCCL_PROTO:-default} (exit $?)"
  grep -E '^ +[0-9]' "$OUT/$n.log" | awk '{printf "%8s %-7s oop %9s ip %9s\n",$1,$6,$7,$11}'
}
for rep in 1 2; do
  run default$rep -b 8 -e 64K -f 4 -n 200 -w 20
  NCCL_PROTO=Simple run simple$rep -b 8 -e 64K -f 4 -n 200 -w 20
done
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING timeout 60 mpirun --allow-run-as-root --bind-to none -np 2 \
  -x CUDA_MPS_PIPE_DIRECTORY -x NCCL_NET -x NCCL_NVLS_ENABLE -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS $b --hosts 2 --nccl \
  -b 8 -e 8 -n 5 -w 1 > "$OUT/nccl-info.log" 2>&1
grep -E "NCCL INFO (Channel|.*nChannels|Using network|comm .*nRanks|.*Algo|.*LL)" "$OUT/nccl-info.log" | head -30
echo quit | nvidia-cuda-mps-control
