#!/usr/bin/env bash
# session 2026-11-27b call 2 (2 GPUs): the drop-in's clients. Build the drop-in and nccl-tests; then
# nccl-tests runs (name, libraries, arguments after -g 1 -c 1) on the drop-in (m) and on NCCL (n),
# and the PyTorch job (torchrun, libnccl.so.2 preloaded). Packed into $OUT/$S.tgz.
set -u
OUT=${OUT:-$PWD/gpu-out}; S=${S:-s2}; mkdir -p "$OUT/$S"; O=$OUT/$S
trap 'cd "$OUT" && tar czf /tmp/$S.tgz $S && rm -rf $S && mv /tmp/$S.tgz .' EXIT
export NCCL_NVLS_ENABLE=0
d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'); export MCCL_NCCL_LIB=$d/lib/libnccl.so.2 NCCL_INCLUDE=$d/include NCCL_LIB_DIR=$d/lib
asroot=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root)
np=$(nvidia-smi -L | wc -l)
mpi="mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none $asroot -x NCCL_NVLS_ENABLE"
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nvcc --version | tail -1; echo "NCCL $MCCL_NCCL_LIB"; echo "np $np"; } > $O/env.txt; cat $O/env.txt
t() { echo "######## $1 ($SECONDS s)"; }
t build
mk/nccl-tests.sh NCCL_TESTS_SRC=third_party/nccl-tests OUT=$O/nt BUILD_ONLY=1 > $O/nt-build.log 2>&1 || { echo "build failed"; tail -20 $O/nt-build.log; tail -20 $O/nt/build-minccl.log; }
if [ -n "${EXTRA_BUILD:-}" ]; then make -j16 BACKEND=cuda $EXTRA_BUILD > $O/build-extra.log 2>&1 || { echo "extra build failed"; grep -m5 error $O/build-extra.log; }; fi
t "nccl-tests"
# RUNS: "name libs test args..." one per line (libs: m, n or mn)
while read -r name libs tst args; do
  [ -n "$name" ] || continue
  for lib in m n; do
    [[ $libs == *$lib* ]] || continue
    [ $SECONDS -lt ${NTEND:-480} ] || { echo "skip $name $lib: time"; continue; }
    L=$PWD/build/cuda/lib; [ $lib = n ] && L=$NCCL_LIB_DIR
    log=$O/nt-$lib-$name.log
    s0=$SECONDS
    LD_LIBRARY_PATH=$L timeout ${NTTIMEOUT:-120} $mpi -x LD_LIBRARY_PATH -np $np build/cuda/nccl-tests/${tst}_perf -g 1 -c 1 $args > $log 2>&1 < /dev/null
    st=$?
    bad=$(awk '$1 ~ /^[0-9]+$/ && NF >= 12 && (($9 ~ /^[0-9]+$/ && $9 != 0) || ($NF ~ /^[0-9]+$/ && $NF != 0))' $log | wc -l)
    echo "$name $lib exit $st ($((SECONDS - s0)) s): banner $(grep -c 'minccl .* serves' $log), rows $(awk '$1 ~ /^[0-9]+$/ && NF >= 12' $log | wc -l), rows with #wrong $bad; $(grep -E 'Avg bus' $log)"
    [ -n "${ROWS:-}" ] && [[ " $ROWS " == *" $name "* ]] && awk '$1 ~ /^[0-9]+$/ && NF >= 12 && $1 >= 1048576 { printf "  %s B %s/%s us %s/%s GB/s; ", $1, $6, $10, $8, $12 } END { print "" }' $log
  done
done <<< "$RUNS"
if [ "${TORCH:-1}" = 1 ]; then
t "PyTorch (torchrun --nproc_per_node $np, libnccl.so.2 preloaded)"
LD_PRELOAD=$PWD/build/cuda/lib/libnccl.so.2 timeout ${TORCHTIMEOUT:-150} torchrun --nproc_per_node $np final/tests/torch_dropin.py > $O/torch.log 2>&1
echo "torch exit $?"; grep -vE '^\[rank|^W[0-9]' $O/torch.log | tail -40
fi
t done
