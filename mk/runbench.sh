#!/usr/bin/env bash
# Runs benchmark entries (plain:BIN or mpi:NP:BIN); each prints its own table.
# MCCL_DRY_RUN=1: print the benchmarks that would run, and run nothing.
set -u
rc=0
for e in "$@"; do
  kind=${e%%:*}; rest=${e#*:}
  if [ -n "${MCCL_DRY_RUN:-}" ]; then echo "${rest#*:}"; continue; fi
  case "$kind" in
    plain) echo "# ==== $(basename "$(dirname "$rest")")/$(basename "$rest")"; "$rest" || rc=1 ;;
    mpi) np=${rest%%:*}; bin=${rest#*:}; np=${np%%,*}
         echo "# ==== $(basename "$(dirname "$bin")")/$(basename "$bin") (mpirun -np $np)"
         $MPIRUN $MPIRUN_FLAGS -np "$np" "$bin" || rc=1 ;;
  esac
done
exit $rc
