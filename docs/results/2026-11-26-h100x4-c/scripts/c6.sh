#!/usr/bin/env bash
# call 6 (4 GPUs): one-shot A/B: main (third_party/ab-main), v1 = several ranks' loads at once
# (third_party/ab-v1), new = v1 + every waiting line re-read in one round (this tree).
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/c6"; O=$OUT/c6
trap 'cd "$OUT" && tar czf /tmp/c6.tgz c6 && rm -rf c6 && mv /tmp/c6.tgz .' EXIT
export NCCL_NVLS_ENABLE=0
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $MCCL_COMMIT (main: $(cat third_party/ab-main/COMMIT), v1: $(cat third_party/ab-v1/COMMIT))"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv; echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"; } > $O/env.txt 2>&1
bf=build/cuda/bin/final/allreduce_perf
echo "######## build ($SECONDS s)"
make -C third_party/ab-main -j5 BACKEND=cuda $bf > $O/build-main.log 2>&1 &
make -C third_party/ab-v1 -j5 BACKEND=cuda $bf > $O/build-v1.log 2>&1 &
make -j6 BACKEND=cuda $bf > $O/build.log 2>&1 || { echo BUILD FAILED; grep error $O/build.log | head; }
wait; echo "built ($SECONDS s)"
small() { awk '$1 ~ /^[0-9]+$/ && ($1 == 8 || $1 == 1024 || $1 == 8192 || $1 == 65536 || $1 == 131072) && $6 == "minccl" { printf "%s %s/%s%s; ", $1, $7, $11, ($10 != "0" || $14 != "0") ? " WRONG" : "" }' "$1"; }
for r in 1 2; do runs="g2 g3 g4 e4"; [ $r = 2 ] && runs="g4"
for run in $runs; do for v in main v1 new; do
  np=${run#?}; args=""; [ "${run%?}" = g ] && args="-G 20"
  bin=$bf; [ $v != new ] && bin=third_party/ab-$v/$bf
  log=$O/${v}_${run}_$r.log
  timeout 40 $mpi -np $np -x NCCL_NVLS_ENABLE $bin -b 8 -e 128K -f 2 $args > $log 2>&1
  echo "round $r $run $v exit $?: $(small $log)"
done; done; done
echo "######## done ($SECONDS s)"
