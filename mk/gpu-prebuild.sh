#!/usr/bin/env bash
# Compile lab 07's kernel files for the GPU on this machine and pack the largest objects into
# .gpucache/cuobj.tar, for mk/gpu-run.sh on a GPU host (name .gpucache in the device call's carry). nvcc spends
# minutes on each of them (one generic kernel per element type, every function, operation and protocol in
# it), which a fresh GPU host would otherwise repeat in every call.
#   mk/gpu-prebuild.sh                  build (make -j, BACKEND=cuda, those objects only) and pack
#   mk/gpu-prebuild.sh --built          pack those already built and up to date, building nothing
#   mk/gpu-prebuild.sh --stamp [DEPS]   print the stamp a pack is valid for: nvcc's version, a checksum of every
#                                       file of this tree that the objects include, as listed in DEPS (default:
#                                       what the objects' dependency files here name), and one of nvcc's commands
# The pack holds that list (build/cuda/obj/PREBUILT.deps) beside the stamp (PREBUILT): gpu-run.sh unpacks the
# objects only where the stamp of that list in its own tree is the pack's, the same nvcc, sources and commands, so
# a change to any other file (a test, another lab's code, a make file's sim-only flag) keeps the pack valid.
set -eu
cd "$(dirname "$0")/.."
objs=$(find labs/07_allreduce/src -name 'kernel_*.cu' | LC_ALL=C sort | sed 's|^|build/cuda/obj/|; s|$|.o|')
# The files of this tree the objects were compiled from, from make's dependency files (x.cu.o's is x.cu.d; -MMD: every
# header by its path; the toolkit's, absolute, are nvcc's version's; the targets themselves are left out).
deps() {
  # shellcheck disable=SC2046 # objs is a list of plain paths
  cat $(echo "$objs" | sed 's|\.o$|.d|') | tr ' ' '\n' | grep -vE '^(|\\|.*:)$' | grep -vE '^(/|build/)' |
    LC_ALL=C sort -u
}
# The commands make would run for the objects, with the toolkit's directory as one word: what the make files decide
# for these objects, so that a change to them that does not reach nvcc's command line (a sim-only flag) keeps a pack.
commands() {
  # shellcheck disable=SC2086 # objs is a list
  make -n -B --no-print-directory BACKEND=cuda $objs 2>/dev/null | grep -E '^[^ ]*/nvcc ' |
    awk '{ d = $1; sub("/bin/nvcc$", "", d); gsub(d, "CUDA"); print }' | LC_ALL=C sort
}
stamp() {  # the list of files on stdin
  echo "nvcc: $("${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}" --version | tail -1)"
  echo "sources: $(LC_ALL=C sort -u | xargs cat | sha256sum | cut -c1-16)"
  echo "commands: $(commands | sha256sum | cut -c1-16)"
}
if [ "${1:-}" = --stamp ]; then
  if [ -n "${2:-}" ]; then stamp <"$2"; else deps | stamp; fi
  exit 0
fi
# Lab 07's kernel files are the slow ones (lab 06's take seconds). Their objects are mostly compressed fatbins
# (xz gains nothing), and what a call carries is limited (64 MiB with the tree): the largest, which are also
# the slowest to compile (8-bit and 16-bit types), go first, up to MCCL_PREBUILT_MB (default 40) in all; the
# host compiles the rest.
# --built: pack only the objects already up to date (a build cut short: the host compiles the others).
if [ "${1:-}" != --built ]; then
  echo "building $(echo "$objs" | wc -w) device objects of lab 07 (BACKEND=cuda, -j$(nproc)): minutes each"
  # shellcheck disable=SC2086 # objs is a list
  make -j"$(nproc)" BACKEND=cuda $objs
fi
budget=$(( ${MCCL_PREBUILT_MB:-40} * 1024 * 1024 )) total=0 packed=""
# shellcheck disable=SC2086,SC2045 # objs is a list of plain paths
for o in $(ls -S $objs); do
  make -q BACKEND=cuda "$o" 2>/dev/null || continue  # not up to date with its sources
  size=$(stat -c %s "$o")
  [ $(( total + size )) -le "$budget" ] && total=$(( total + size )) && packed="$packed $o"
done
mkdir -p .gpucache
deps >build/cuda/obj/PREBUILT.deps
stamp <build/cuda/obj/PREBUILT.deps >build/cuda/obj/PREBUILT
# shellcheck disable=SC2086
tar -cf .gpucache/cuobj.tar build/cuda/obj/PREBUILT build/cuda/obj/PREBUILT.deps $packed
# shellcheck disable=SC2086 # counts the words
echo "packed $(echo $packed | wc -w) of $(echo "$objs" | wc -w) (the largest first, $(( total >> 20 )) MiB):$packed"
echo "into .gpucache/cuobj.tar: carry .gpucache in the device call"
cat build/cuda/obj/PREBUILT
