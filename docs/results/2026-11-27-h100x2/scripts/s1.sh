#!/usr/bin/env bash
# session 2026-11-27 call 1 (2 GPUs): gpu-run.sh's tests, demo and sanitizers for labs 06, 07, final at
# MCCL_COMMIT (MCCL_BENCH=0), then lab 06's P2P 512 MiB one-way kernels under ncu (ours and NCCL's,
# mk/gpu-profile.sh prims, rank 0 = sender, then rank 1 = receiver). Everything packed into $OUT/s1.tgz.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/s1"; O=$OUT/s1
trap 'cd "$OUT" && tar czf /tmp/s1.tgz s1 && rm -rf s1 && mv /tmp/s1.tgz .' EXIT
export NCCL_NVLS_ENABLE=0
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2 NCCL_INCLUDE=$d/include NCCL_LIB_DIR=$d/lib
echo "######## gpu-run tests ($SECONDS s)"
MCCL_PACK=0 MCCL_BENCH=0 LABS="06 07 final" MCCL_SANITIZE_TIMEOUT=100 OUT=$O timeout 470 mk/gpu-run.sh 2>&1 | tail -45
for r in 0 1; do
  echo "######## ncu lab 06 prims 512M, rank $r ($SECONDS s)"
  [ $SECONDS -lt 520 ] || { echo "skipped: time"; continue; }
  MCCL_PROFILE_BENCH=prims MCCL_PROFILE_RANK=$r timeout $((585 - SECONDS)) mk/gpu-profile.sh $O/prof-prims-r$r 512M 2>&1 | tail -12
done
echo "######## done ($SECONDS s)"
