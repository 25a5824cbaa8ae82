#!/usr/bin/env bash
# libminccl exports exactly the calls final/include/minccl.h and minccl_device.h declare: `nm -D` of the shared library
# and the global symbols of the static one, against the declarations and the version script.
# Run by make test (MCCL_BIN_DIR from make: the library is beside it, in ../lib).
. "$(dirname "$0")/../../common/tests/shtest_lib.sh"

lib=${MCCL_BIN_DIR:-build/sim/bin}/../lib
# minccl_device.h's calls, and the one of lab 09's mccl_dev_comm.h that it exports (the rest there is inline).
declared() {
  sed -nE 's/^(mcclResult_t|const char\*|mcclTeam|int) (mccl[A-Za-z]+)\(.*/\2/p' final/include/minccl.h \
    final/include/minccl_device.h labs/09_device_api/include/mccl_dev_comm.h | sort
}

sharedExportsOnlyTheApi() {
  [ -f "$lib/libminccl.so" ] || shtest_fail "$lib/libminccl.so not built"
  local want got
  want=$(declared)
  [ "$(echo "$want" | wc -l)" -ge 19 ] || shtest_fail "found only $(echo "$want" | wc -l) declarations in minccl.h"
  got=$(nm -D --defined-only "$lib/libminccl.so" | awk '{print $3}' | sed 's/@.*//' | grep -v '^MINCCL_' | sort)
  [ "$got" = "$want" ] || shtest_fail "nm -D differs from minccl.h: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | tr '\n' ' ')"
  local map
  map=$(sed -nE 's/^ +(mccl[A-Za-z]+);$/\1/p' final/minccl.map | sort)
  [ "$map" = "$want" ] || shtest_fail "final/minccl.map differs from minccl.h: $(diff <(echo "$want") <(echo "$map") | grep '^[<>]' | tr '\n' ' ')"
}

staticKeepsOnlyTheApiGlobal() {
  [ -f "$lib/libminccl.a" ] || shtest_fail "$lib/libminccl.a not built"
  local want got
  want=$(declared)
  # GNU unique symbols ('u': on the sim, the C++ inline variables of the kernels' portability header,
  # threadIdx & co, and function statics of mcclSim::registerKernel) cannot be made local by
  # objcopy; the linker merges them with any twin instead of clashing. They are listed, not compared.
  got=$(nm -g --defined-only "$lib/libminccl.a" | awk 'NF == 3 && $2 != "u" {print $3}' | sort)
  [ "$got" = "$want" ] || shtest_fail "global symbols of libminccl.a differ from minccl.h: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | head -20 | tr '\n' ' ')"
}

# Neither library carries the test harness.
noHarness() {
  ! nm "$lib/libminccl.a" 2>/dev/null | grep -q mcclTestMain || shtest_fail "libminccl.a contains the test harness"
  ! nm "$lib/libminccl.so" 2>/dev/null | grep -q mcclTestMain || shtest_fail "libminccl.so contains the test harness"
}

shtest_case sharedExportsOnlyTheApi sharedExportsOnlyTheApi
shtest_case staticKeepsOnlyTheApiGlobal staticKeepsOnlyTheApiGlobal
shtest_case noHarness noHarness
shtest_main "$@"
