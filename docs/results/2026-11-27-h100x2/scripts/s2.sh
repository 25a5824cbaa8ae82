#!/usr/bin/env bash
# session 2026-11-27 call 2 (2 GPUs): one-shot with SIMPLE (2 ranks), working tree vs main (5bdd089,
# third_party/ab-main). Build both; lab 07's test_allreduce (one process, 2 GPUs) and mpi_allreduce (np 2)
# on the tree, memcheck and racecheck of mpi_allreduce np2; lab 07 --tune -b 128K -e 64M (2 ranks); then
# final's allreduce_perf --nccl -b 8 -e 64M eager and -G 20, main and tree in turn, 2 rounds.
# Everything packed into $OUT/s2.tgz.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/s2"; O=$OUT/s2
trap 'cd "$OUT" && tar czf /tmp/s2.tgz s2 && rm -rf s2 && mv /tmp/s2.tgz .' EXIT
export NCCL_NVLS_ENABLE=0 MCCL_TEST_TIMEOUT=200
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2 NCCL_INCLUDE=$d/include NCCL_LIB_DIR=$d/lib
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot -x NCCL_NVLS_ENABLE"
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nvcc --version | tail -1; echo "NCCL $MCCL_NCCL_LIB"; } > $O/env.txt; cat $O/env.txt
echo "######## build ($SECONDS s)"
make -C third_party/ab-main -j6 BACKEND=cuda build/cuda/bin/final/allreduce_perf > $O/build-main.log 2>&1 &
make -k -j12 BACKEND=cuda all > $O/build.log 2>&1 || { echo BUILD FAILED; grep error $O/build.log | head; }
wait; echo "built ($SECONDS s); main: $(tail -1 $O/build-main.log)"
b=build/cuda/bin/07_allreduce
echo "######## tests ($SECONDS s)"
timeout 150 $b/test_allreduce > $O/test_allreduce.log 2>&1; echo "test_allreduce exit $?: $(grep -E '^(FAIL|SKIP)' $O/test_allreduce.log | head -5) $(tail -1 $O/test_allreduce.log)"
timeout 100 $mpi -np 2 $b/mpi_allreduce > $O/mpi_allreduce.log 2>&1; echo "mpi_allreduce np2 exit $?: $(tail -1 $O/mpi_allreduce.log)"
timeout 60 $mpi -np 2 $b/mpi_comm > $O/mpi_comm.log 2>&1; echo "mpi_comm np2 exit $?: $(tail -1 $O/mpi_comm.log)"
for tool in memcheck racecheck; do
  timeout 100 $mpi -np 2 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $b/mpi_allreduce > $O/sanitizer-$tool-07.log 2>&1
  echo "$tool mpi_allreduce np2: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/sanitizer-$tool-07.log | sort | uniq -c | tr -s ' ' | tr '\n' ';'))"
done
echo "######## lab 07 --tune 128K-64M ($SECONDS s)"
timeout 120 $mpi -np 2 $b/mpi_bench_allreduce --tune -b 128K -e 64M > $O/tune2.log 2>&1; echo "exit $?"; grep -A40 -- "--tune:" $O/tune2.log | head -30
echo "######## A/B allreduce_perf ($SECONDS s)"
rows() { awk '$1 ~ /^[0-9]+$/ && $1 >= 131072 && $7 ~ /^[0-9.]+$/ && ($6 == "minccl" || $6 == "nccl" || $6 == "nccl-sym") { printf "%s %s %s/%s us %s/%s GB/s; ", $1, $6, $7, $11, $9, $13 }' "$1"; }
for r in 1 2; do
  for v in main new; do
    bin=build/cuda/bin/final/allreduce_perf; [ $v = main ] && bin=third_party/ab-main/$bin
    for run in eager graph; do
      [ $SECONDS -lt 560 ] || { echo "skip $v $run $r: time"; continue; }
      args=""; [ $run = graph ] && args="-G 20"
      timeout 60 $mpi -np 2 $bin --nccl -b 8 -e 64M -f 2 $args --csv $O/ab-${v}_${run}_$r.csv > $O/ab-${v}_${run}_$r.log 2>&1
      echo "round $r $v $run exit $?"; [ $r = 1 ] && [ $v = new ] && grep -E "^# (2 MiB|32 MiB|8 B|data)" $O/ab-${v}_${run}_$r.log
    done
  done
done
for f in $O/ab-*_1.log; do echo "== $(basename $f): $(rows $f | tr ';' '\n' | grep -E "^ ?(262144|524288|1048576|2097152|4194304|8388608|33554432|67108864) minccl" | tr '\n' ';')"; done
echo "######## done ($SECONDS s)"
