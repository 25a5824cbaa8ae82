#!/usr/bin/env bash
# call 5 (4 GPUs): one-shot pulling several ranks at once (this tree) against main (third_party/ab-main):
# allreduce_perf -b 8 -e 256K in a graph at 2, 3, 4 ranks and eager at 4, 2 rounds alternating; lab 07's
# tests on this tree; mpi_allreduce under memcheck and racecheck at 4 ranks.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/c5"; O=$OUT/c5
trap 'cd "$OUT" && tar czf /tmp/c5.tgz c5 && rm -rf c5 && mv /tmp/c5.tgz .' EXIT
export NCCL_NVLS_ENABLE=0
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2 NCCL_INCLUDE=$d/include NCCL_LIB_DIR=$d/lib
export MCCL_COMMIT
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
{ echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "commit: $MCCL_COMMIT (main: $(cat third_party/ab-main/COMMIT))"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
  echo "nvcc: $(nvcc --version | tail -1)"; echo "mpirun: $(mpirun --version | head -1)"; echo "NCCL library: $MCCL_NCCL_LIB"; echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"; } > $O/env.txt 2>&1
echo "######## build ($SECONDS s)"
bf=build/cuda/bin/final/allreduce_perf
make -C third_party/ab-main -j6 BACKEND=cuda $bf > $O/build-main.log 2>&1 &
make -k -j12 BACKEND=cuda all > $O/build.log 2>&1 || { echo BUILD FAILED; grep error $O/build.log | head; }
wait; echo "built ($SECONDS s)"
small() { awk '$1 ~ /^[0-9]+$/ && ($1 == 8 || $1 == 1024 || $1 == 8192 || $1 == 65536 || $1 == 262144) && $6 == "minccl" { printf "%s %s/%s; ", $1, $7, $11 }' "$1"; }
echo "######## A/B ($SECONDS s)"
for r in 1 2; do for run in g2 g3 g4 e4; do for v in main new; do
  np=${run#?}; args=""; [ "${run%?}" = g ] && args="-G 20"
  bin=$bf; [ $v = main ] && bin=third_party/ab-main/$bf
  log=$O/${v}_${run}_$r.log
  timeout 60 $mpi -np $np -x NCCL_NVLS_ENABLE $bin -b 8 -e 256K -f 2 $args --csv ${log%.log}.csv > $log 2>&1
  echo "round $r $run $v exit $?: $(small $log)"
done; done; done
echo "######## lab 07 tests ($SECONDS s)"
timeout 200 make BACKEND=cuda test LAB=07 > $O/test07.log 2>&1; echo "exit $?"; grep -E "^(FAIL|SKIP)|^[0-9]+ passed" $O/test07.log
echo "######## mpi_allreduce np4 under memcheck, racecheck ($SECONDS s)"
for tool in memcheck racecheck; do
  timeout 120 $mpi -np 4 -x NCCL_NVLS_ENABLE compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 build/cuda/bin/07_allreduce/mpi_allreduce > $O/sanitizer-$tool-07-np4.log 2>&1
  echo "$tool exit $? ($(grep -cE '^(PASS|FAIL) ' $O/sanitizer-$tool-07-np4.log) tests; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/sanitizer-$tool-07-np4.log | sort | uniq -c | tr -s ' ' | tr '\n' ';'))"
done
echo "######## done ($SECONDS s)"
