#!/usr/bin/env bash
# Compile lab 07's kernel files for the GPU on this machine and pack the largest objects into
# .gpucache/cuobj.tar, for mk/gpu-run.sh on a GPU host (name .gpucache in the device call's carry). nvcc spends
# minutes on each of them (one generic kernel per element type, every function, operation and protocol in
# it), which a fresh GPU host would otherwise repeat in every call.
#   mk/gpu-prebuild.sh           build (make -j, BACKEND=cuda, those objects only) and pack
#   mk/gpu-prebuild.sh --stamp   print the stamp the pack is valid for: nvcc's version and a checksum of every
#                                source and header the objects can depend on, and of the make files
# gpu-run.sh unpacks the objects only where its own stamp is the pack's: the same nvcc and the same sources.
set -eu
cd "$(dirname "$0")/.."
stamp() {
  echo "nvcc: $("${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}" --version | tail -1)"
  echo "sources: $(find common labs final mk Makefile -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' \
    -o -name '*.mk' -o -name Makefile \) -not -path '*/docs/*' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)"
}
if [ "${1:-}" = --stamp ]; then stamp; exit 0; fi
# Lab 07's kernel files are the slow ones (lab 06's take seconds). Their objects are mostly compressed fatbins
# (xz gains nothing), and what a call carries is limited (64 MiB with the tree): the largest, which are also
# the slowest to compile (8-bit and 16-bit types), go first, up to MCCL_PREBUILT_MB (default 40) in all; the
# host compiles the rest.
objs=$(find labs/07_allreduce/src -name 'kernel_*.cu' | LC_ALL=C sort | sed 's|^|build/cuda/obj/|; s|$|.o|')
echo "building $(echo "$objs" | wc -w) device objects of lab 07 (BACKEND=cuda, -j$(nproc)): minutes each"
# shellcheck disable=SC2086 # objs is a list
make -j"$(nproc)" BACKEND=cuda $objs
budget=$(( ${MCCL_PREBUILT_MB:-40} * 1024 * 1024 )) total=0 packed=""
# shellcheck disable=SC2086,SC2045 # objs is a list of plain paths
for o in $(ls -S $objs); do
  size=$(stat -c %s "$o")
  [ $(( total + size )) -le "$budget" ] && total=$(( total + size )) && packed="$packed $o"
done
mkdir -p .gpucache
stamp > build/cuda/obj/PREBUILT
# shellcheck disable=SC2086
tar -cf .gpucache/cuobj.tar build/cuda/obj/PREBUILT $packed
# shellcheck disable=SC2086 # counts the words
echo "packed $(echo $packed | wc -w) of $(echo "$objs" | wc -w) (the largest first, $(( total >> 20 )) MiB):$packed"
echo "into .gpucache/cuobj.tar: carry .gpucache in the device call"
cat build/cuda/obj/PREBUILT
