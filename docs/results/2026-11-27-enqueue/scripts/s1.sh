#!/usr/bin/env bash
# session 2026-11-27b call 1 (2 GPUs): the enqueue layer (e7d7b26 + tree) against main before it
# (9f9f581, third_party/ab-main). Build both; lab 07's enqueue/allreduce/sendrecv tests, final's
# mpi_coll and test_api; final's allreduce_perf --nccl -b 8 -e 1G eager and -G 20 for the tree and the
# old main in turn; nccl-tests' alltoall, gather, scatter, sendrecv on the drop-in and on NCCL.
set -u
OUT=${OUT:-$PWD/gpu-out}; S=${S:-s1}; mkdir -p "$OUT/$S"; O=$OUT/$S
trap 'cd "$OUT" && tar czf /tmp/$S.tgz $S && rm -rf $S && mv /tmp/$S.tgz .' EXIT
export NCCL_NVLS_ENABLE=0 MCCL_TEST_TIMEOUT=200
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2 NCCL_INCLUDE=$d/include NCCL_LIB_DIR=$d/lib
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
np=$(nvidia-smi -L | wc -l)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot -x NCCL_NVLS_ENABLE"
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nvidia-smi topo -m; nvcc --version | tail -1; echo "NCCL $MCCL_NCCL_LIB"; echo "np $np"; } > $O/env.txt; cat $O/env.txt
t() { echo "######## $1 ($SECONDS s)"; }
t build
if [ "${AB:-1}" = 1 ]; then make -C third_party/ab-main -j4 BACKEND=cuda build/cuda/bin/final/allreduce_perf > $O/build-main.log 2>&1 & fi
make -k -j14 BACKEND=cuda NCCL_INCLUDE=$NCCL_INCLUDE all build/cuda/lib/libnccl.so > $O/build.log 2>&1 || { echo BUILD FAILED; grep -E 'error|Error' $O/build.log | head; }
wait; echo "built ($SECONDS s); main: $(tail -1 $O/build-main.log 2>/dev/null)"
b=build/cuda/bin/07_allreduce
if [ "${TESTS:-1}" = 1 ]; then
t tests
timeout 100 $b/test_enqueue > $O/test_enqueue.log 2>&1; echo "test_enqueue exit $?: $(grep -E '^(FAIL|SKIP)' $O/test_enqueue.log | head -5) $(tail -1 $O/test_enqueue.log)"
for p in mpi_enqueue mpi_allreduce mpi_sendrecv; do
  timeout 150 $mpi -np $np $b/$p > $O/$p.log 2>&1; echo "$p np$np exit $?: $(grep -E '^FAIL' $O/$p.log | head -5) $(tail -1 $O/$p.log)"
done
timeout 150 $b/test_allreduce > $O/test_allreduce.log 2>&1; echo "test_allreduce exit $?: $(grep -E '^(FAIL|SKIP)' $O/test_allreduce.log | head -5) $(tail -1 $O/test_allreduce.log)"
timeout 150 $mpi -np $np build/cuda/bin/final/mpi_coll > $O/mpi_coll.log 2>&1; echo "final mpi_coll np$np exit $?: $(grep -E '^FAIL' $O/mpi_coll.log | head -5) $(tail -1 $O/mpi_coll.log)"
timeout 100 build/cuda/bin/final/test_api > $O/test_api.log 2>&1; echo "final test_api exit $?: $(grep -E '^(FAIL|SKIP)' $O/test_api.log | head -5) $(tail -1 $O/test_api.log)"
fi
if [ "${AB:-1}" = 1 ]; then
t "A/B allreduce_perf"
for v in new main; do
  bin=build/cuda/bin/final/allreduce_perf; [ $v = main ] && bin=third_party/ab-main/$bin
  for run in eager graph; do
    [ $SECONDS -lt ${ABEND:-420} ] || { echo "skip $v $run: time"; continue; }
    args=""; [ $run = graph ] && args="-G 20"
    timeout 90 $mpi -np $np $bin --nccl -b 8 -e ${ABMAX:-1G} -f 2 $args --csv $O/ar-${v}_${run}.csv --json $O/ar-${v}_${run}.json > $O/ar-${v}_${run}.log 2>&1
    echo "$v $run exit $?"; grep -E "^# " $O/ar-${v}_${run}.log | tail -12
  done
done
fi
if [ -n "${NT:-}" ]; then
t "nccl-tests $NT"
mk/nccl-tests.sh NCCL_TESTS_SRC=third_party/nccl-tests OUT=$O/nt BUILD_ONLY=1 > $O/nt-build.log 2>&1 || { echo "nccl-tests build failed"; tail -5 $O/nt-build.log; }
for tst in $NT; do
  for lib in minccl nccl; do
    [ $SECONDS -lt ${NTEND:-560} ] || { echo "skip $tst $lib: time"; continue; }
    L=$PWD/build/cuda/lib; [ $lib = nccl ] && L=$NCCL_LIB_DIR
    LD_LIBRARY_PATH=$L timeout 60 $mpi -x LD_LIBRARY_PATH -np $np build/cuda/nccl-tests/${tst%%:*}_perf -b ${NTMIN:-8} -e ${NTMAX:-1G} -f 4 -g 1 -c 1 $(echo "${tst#*:}" | grep -v "^${tst}$" | tr , ' ') > $O/nt-$lib-${tst//[:,]/_}.log 2>&1
    echo "$tst $lib exit $?: $(grep -c 'minccl .* serves' $O/nt-$lib-${tst//[:,]/_}.log) banner; $(awk '$1 ~ /^[0-9]+$/ && NF >= 12 { printf "%s %s/%s GB/s w%s/%s; ", $1, $8, $12, $9, $13 }' $O/nt-$lib-${tst//[:,]/_}.log)"
  done
done
fi
t done
