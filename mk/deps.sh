#!/usr/bin/env bash
# make deps: install what minccl needs from Debian/Ubuntu packages.
#   deps.sh install        install every missing package (apt-get as root, else print the command)
#   deps.sh ensure TARGET  called by make test/demo/bench/docs/linkcheck/format-check/fuzz: install what is missing if we can;
#                          fail only if something TARGET cannot work without is still missing.
set -u
mode=${1:-install}; target=${2:-all}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")}

# command -> package (matplotlib: a Python module, found by mk/plot.sh --check, not a command)
declare -A pkg=([mpicc]=libopenmpi-dev [mpirun]=openmpi-bin [doxygen]=doxygen [dot]=graphviz [gdb]=gdb
               [linkchecker]=linkchecker [clang-format]=clang-format [g++]=g++ [clang]=clang [libfuzzer]=libclang-rt-dev
               [matplotlib]=python3-matplotlib)
# What each target needs (required) and can use (wanted: gdb lets `make test` check lab.gdb and
# matplotlib its `make plot` test, SKIP otherwise). g++ compiles the .cu device code on the sim backend.
# `make fuzz` needs clang and its libFuzzer runtime (libclang-rt-dev: apt's --no-install-recommends
# leaves it out). `make deps` wants everything.
case "$target" in
  test) required="mpicc mpirun g++"; wanted="mpicc mpirun gdb g++ matplotlib" ;;
  plot) required="matplotlib"; wanted="$required" ;;
  demo|bench) required="mpicc mpirun g++"; wanted="$required" ;;
  docs) required="doxygen dot"; wanted="$required" ;;
  linkcheck) required="linkchecker"; wanted="$required" ;;
  format-check) required="clang-format"; wanted="$required" ;;
  fuzz) required="clang libfuzzer"; wanted="$required" ;;
  *) required=""; wanted="${!pkg[*]}" ;;
esac
[ "$mode" = install ] && wanted="${!pkg[*]}"

# A command on PATH; libfuzzer is clang's runtime library and matplotlib a Python module, not commands.
have() {
  if [ "$1" = matplotlib ]; then
    "$(dirname "$0")/plot.sh" --check
  elif [ "$1" = libfuzzer ]; then
    command -v clang >/dev/null 2>&1 && compgen -G "$(clang -print-resource-dir)/lib/linux/libclang_rt.fuzzer-*.a" >/dev/null
  else
    command -v "$1" >/dev/null 2>&1
  fi
}

missing_pkgs() {
  local out=""
  for c in $wanted; do have "$c" || out="$out ${pkg[$c]}"; done
  echo "$out" | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/^ *//;s/ *$//'
}

if [ ! -f "$CUDA_HOME/include/cuda.h" ]; then
  echo "minccl needs the CUDA Toolkit headers (cuda.h) even for the sim backend: none under $CUDA_HOME." >&2
  echo "Install the CUDA Toolkit (https://developer.nvidia.com/cuda-downloads) or set CUDA_HOME." >&2
  exit 1
fi

missing=$(missing_pkgs)
if [ -n "$missing" ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "deps: installing $missing"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing; } >/tmp/minccl-deps.log 2>&1 \
      || echo "deps: apt-get failed (see /tmp/minccl-deps.log)" >&2
  else
    echo "deps: missing packages: $missing"
    echo "deps: install them with: sudo apt-get install $missing"
  fi
fi
still=""
for c in $required; do have "$c" || still="$still $c"; done
if [ -n "$still" ]; then
  echo "deps: '$target' cannot run without:$still (packages: $(for c in $still; do printf '%s ' "${pkg[$c]}"; done))" >&2
  exit 1
fi
if [ "$mode" = install ] && [ -z "$(missing_pkgs)" ]; then echo "deps: everything minccl uses is installed"; fi
exit 0
