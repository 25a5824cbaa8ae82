#!/usr/bin/env bash
# Runs benchmark entries (plain:BIN or mpi:NP:BIN); each prints its own table.
# MCCL_DRY_RUN=1: print the benchmarks that would run, and run nothing.
# MCCL_BENCH_ARGS_<binary> (e.g. MCCL_BENCH_ARGS_mpi_bench_prims="-e 64M") adds arguments to one
# benchmark; MCCL_BENCH_TIMEOUT (seconds) bounds each one. An mpi entry runs at the first rank count of
# its list, or at MCCL_BENCH_NP where the list has it (mk/gpu-run.sh sets it to MCCL_NP: on a 4-GPU host
# lab 07's and final's benchmarks, mpi:2,3,4, run 4 ranks; lab 06's two-rank one keeps 2).
set -u
rc=0
for e in "$@"; do
  kind=${e%%:*}; rest=${e#*:}
  if [ -n "${MCCL_DRY_RUN:-}" ]; then echo "${rest#*:}"; continue; fi
  case "$kind" in
    plain) args=MCCL_BENCH_ARGS_$(basename "$rest")
           echo "# ==== $(basename "$(dirname "$rest")")/$(basename "$rest") ${!args:-}"
           ${MCCL_BENCH_TIMEOUT:+timeout $MCCL_BENCH_TIMEOUT} "$rest" ${!args:-} || rc=1 ;;
    mpi) nps=${rest%%:*}; bin=${rest#*:}; np=${nps%%,*}
         [[ ",$nps," == *",${MCCL_BENCH_NP:-},"* ]] && np=$MCCL_BENCH_NP
         args=MCCL_BENCH_ARGS_$(basename "$bin")
         echo "# ==== $(basename "$(dirname "$bin")")/$(basename "$bin") (mpirun -np $np) ${!args:-}"
         ${MCCL_BENCH_TIMEOUT:+timeout $MCCL_BENCH_TIMEOUT} $MPIRUN $MPIRUN_FLAGS -np "$np" "$bin" ${!args:-} || rc=1 ;;
  esac
done
exit $rc
