#!/usr/bin/env bash
# Runs benchmark entries (plain:BIN or mpi:NP:BIN); each prints its own table.
# MCCL_DRY_RUN=1: print the benchmarks that would run, and run nothing.
# MCCL_BENCH_ARGS_<binary> (e.g. MCCL_BENCH_ARGS_mpi_bench_prims="-e 64M") adds arguments to one
# benchmark; MCCL_BENCH_TIMEOUT (seconds) bounds each one.
set -u
rc=0
for e in "$@"; do
  kind=${e%%:*}; rest=${e#*:}
  if [ -n "${MCCL_DRY_RUN:-}" ]; then echo "${rest#*:}"; continue; fi
  case "$kind" in
    plain) args=MCCL_BENCH_ARGS_$(basename "$rest")
           echo "# ==== $(basename "$(dirname "$rest")")/$(basename "$rest") ${!args:-}"
           ${MCCL_BENCH_TIMEOUT:+timeout $MCCL_BENCH_TIMEOUT} "$rest" ${!args:-} || rc=1 ;;
    mpi) np=${rest%%:*}; bin=${rest#*:}; np=${np%%,*}; args=MCCL_BENCH_ARGS_$(basename "$bin")
         echo "# ==== $(basename "$(dirname "$bin")")/$(basename "$bin") (mpirun -np $np) ${!args:-}"
         ${MCCL_BENCH_TIMEOUT:+timeout $MCCL_BENCH_TIMEOUT} $MPIRUN $MPIRUN_FLAGS -np "$np" "$bin" ${!args:-} || rc=1 ;;
  esac
done
exit $rc
