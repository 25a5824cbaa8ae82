#!/usr/bin/env bash
# call 1: tests + sanitizers on main, then racecheck of the split-instances branch
set -u
OUT=${OUT:-$PWD/gpu-out}
MCCL_PACK=0 MCCL_BENCH=0 LABS="06 07 final" mk/gpu-run.sh
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot"
echo "######## branch split-instances: $(cat third_party/ab-split/COMMIT) ($SECONDS s)"
make -C third_party/ab-split -j16 BACKEND=cuda build/cuda/bin/07_allreduce/mpi_sendrecv > "$OUT/split-build.log" 2>&1 || { echo build failed; tail -20 "$OUT/split-build.log"; }
for tool in racecheck synccheck; do
  log="$OUT/split-$tool.log"
  MCCL_TEST_FILTER=Layouts timeout 200 $mpi -np 2 -x NCCL_NVLS_ENABLE -x MCCL_TEST_FILTER \
    compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    third_party/ab-split/build/cuda/bin/07_allreduce/mpi_sendrecv > "$log" 2>&1
  echo "split $tool: exit $? ($(grep -cE '^(PASS|FAIL) ' "$log") tests; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c | tr -s ' ' | tr '\n' ';'))"
done
echo "######## done ($SECONDS s)"
cd "$OUT" && tar czf /tmp/gpu-run.tgz . && find . -mindepth 1 -delete && mv /tmp/gpu-run.tgz . 
