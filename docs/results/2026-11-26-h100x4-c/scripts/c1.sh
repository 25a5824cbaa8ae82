#!/usr/bin/env bash
# call 1 (4 GPUs): build main and the own-group branch's mpi_sendrecv; the branch under racecheck/synccheck
# and its send/recv tests at 2 and 4 ranks; the NVLink ceiling probe; then gpu-run.sh's tests and
# sanitizers for labs 06, 07, final (MCCL_BENCH=0). Everything packed into $OUT/c1.tgz.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/c1"; O=$OUT/c1
trap 'cd "$OUT" && tar czf /tmp/c1.tgz c1 && rm -rf c1 && mv /tmp/c1.tgz .' EXIT
export NCCL_NVLS_ENABLE=0
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2 NCCL_INCLUDE=$d/include NCCL_LIB_DIR=$d/lib
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
echo "######## build ($SECONDS s)"
make -C third_party/ab-own -j8 BACKEND=cuda build/cuda/bin/07_allreduce/mpi_sendrecv > $O/build-own.log 2>&1 &
make -k -j16 BACKEND=cuda all > $O/build.log 2>&1 || { echo BUILD FAILED; grep error $O/build.log | head; }
nvcc -arch=sm_90 -O3 -std=c++17 -o /tmp/p2pceil third_party/scripts/p2pceil.cu > $O/build-probe.log 2>&1
wait; echo "built ($SECONDS s); own: $(tail -1 $O/build-own.log)"
echo "######## ceiling probe ($SECONDS s)"
timeout 60 /tmp/p2pceil > $O/p2pceil.log 2>&1; echo "exit $?"; cat $O/p2pceil.log
echo "######## own-group branch: sendrecv tests np2/np4, racecheck, synccheck ($SECONDS s)"
b=third_party/ab-own/build/cuda/bin/07_allreduce/mpi_sendrecv
for np in 2 4; do timeout 90 $mpi -np $np -x NCCL_NVLS_ENABLE $b > $O/own-sendrecv-np$np.log 2>&1; echo "np$np exit $? $(tail -1 $O/own-sendrecv-np$np.log)"; done
for tool in racecheck synccheck; do
  MCCL_TEST_FILTER=Layouts timeout 120 $mpi -np 2 -x NCCL_NVLS_ENABLE -x MCCL_TEST_FILTER compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $b > $O/own-$tool.log 2>&1
  echo "$tool exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/own-$tool.log | sort | uniq -c | tr -s ' ' | tr '\n' ';'))"
done
echo "######## gpu-run tests ($SECONDS s)"
MCCL_COMMIT=$MCCL_COMMIT MCCL_PACK=0 MCCL_BENCH=0 LABS="06 07 final" MCCL_SANITIZE_TIMEOUT=100 OUT=$O timeout $((570 - SECONDS)) mk/gpu-run.sh 2>&1 | tail -40
echo "######## done ($SECONDS s)"
