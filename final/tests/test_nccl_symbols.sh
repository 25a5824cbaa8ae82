#!/usr/bin/env bash
# The NCCL drop-in exports exactly NCCL 2.28's API: every function nccl.h declares (ncclX and its
# pncclX twin) is a dynamic symbol of libnccl.so.2, nothing is misspelt, and nothing else is
# exported but final/nccl/extra_symbols.txt. The stubs file covers every declared name (so a header
# that grows a call fails here until final/nccl/gen_stubs.py is rerun), and the calls minccl serves
# are strong definitions, not the weak stubs.
. "$(dirname "$0")/../../common/tests/shtest_lib.sh"

header=${NCCL_INCLUDE:-${CUDA_HOME:-/usr/local/cuda}/include}/nccl.h
lib=${MCCL_BIN_DIR:-build/sim/bin}/../lib/libnccl.so.2

need() {
  [ -f "$header" ] || shtest_skip "no nccl.h at $header (set NCCL_INCLUDE)"
  command -v python3 >/dev/null || shtest_skip "python3 is needed to read nccl.h's declarations"
}
need_lib() {
  need
  compgen -G 'final/src/*.c' >/dev/null || shtest_skip "final/src has no sources yet: libnccl.so.2 is not built"
  [ -f "$lib" ] || shtest_fail "$lib was not built"
}
header_names() { python3 final/nccl/gen_stubs.py --names "$header"; }
exported() { nm -D --defined-only "$lib" | awk '$2 ~ /^[TWiV]$/ {print $3}' | sed 's/@.*//' | sort -u; }

stubs_cover_header() {
  need
  local names stubs missing
  names=$(header_names) || shtest_fail "gen_stubs.py --names failed on $header"
  [ "$(echo "$names" | wc -l)" -ge 80 ] || shtest_fail "only $(echo "$names" | wc -l) declarations read from $header"
  # Stub definitions, and the pncclX weak aliases of them.
  stubs=$({ sed -nE 's/^__attribute__\(\(weak\)\) [^(]*[ *](p?nccl[A-Za-z0-9_]+)\(.*/\1/p' final/nccl/nccl_stubs.c
    tr '\n' ' ' <final/nccl/nccl_stubs.c | grep -oE '__typeof\(nccl[A-Za-z0-9_]+\) +pnccl[A-Za-z0-9_]+' | awk '{print $2}'; } |
    sort -u)
  missing=$(comm -23 <(echo "$names") <(echo "$stubs") | tr '\n' ' ')
  [ -z "$missing" ] || shtest_fail "nccl_stubs.c lacks $missing(rerun final/nccl/gen_stubs.py $header > final/nccl/nccl_stubs.c)"
  local extra
  extra=$(comm -13 <(echo "$names") <(echo "$stubs") | tr '\n' ' ')
  [ -z "$extra" ] || shtest_fail "nccl_stubs.c has stubs nccl.h does not declare: $extra"
}

exports_match_header() {
  need_lib
  local want have missing extra
  want=$( (header_names; grep -v '^#' final/nccl/extra_symbols.txt) | sort -u)
  have=$(exported)
  missing=$(comm -23 <(echo "$want") <(echo "$have") | tr '\n' ' ')
  extra=$(comm -13 <(echo "$want") <(echo "$have") | tr '\n' ' ')
  [ -z "$missing" ] || shtest_fail "libnccl.so.2 does not export: $missing"
  [ -z "$extra" ] || shtest_fail "libnccl.so.2 exports names neither nccl.h nor extra_symbols.txt has: $extra"
}

# The calls docs/nccl-dropin.md says minccl serves are strong (T) symbols; a weak (W) one is a stub.
served_are_strong() {
  need_lib
  local n s weak="" syms
  syms=$(nm -D --defined-only "$lib")
  for n in ncclGetVersion ncclGetUniqueId ncclCommInitRank ncclCommInitRankConfig ncclCommInitRankScalable \
           ncclCommInitAll ncclCommFinalize ncclCommDestroy ncclCommAbort ncclCommSplit ncclCommGetAsyncError \
           ncclCommCount ncclCommCuDevice ncclCommUserRank ncclGetErrorString ncclGetLastError ncclCommRegister \
           ncclCommDeregister ncclCommWindowRegister ncclCommWindowDeregister ncclMemAlloc ncclMemFree \
           ncclRedOpCreatePreMulSum ncclRedOpDestroy ncclAllReduce ncclAllGather ncclReduceScatter ncclBroadcast \
           ncclBcast ncclReduce ncclSend ncclRecv ncclGroupStart ncclGroupEnd; do
    for s in "$n" "p$n"; do
      grep -qE " T $s(@|$)" <<<"$syms" || weak+="$s "
    done
  done
  # The device API's host calls (no pncclX twins: NCCL's headers declare none).
  for n in ncclDevCommCreate ncclDevCommDestroy ncclTeamWorld ncclTeamLsa ncclTeamRail ncclTeamRankToWorld \
           ncclTeamRankToLsa ncclLsaBarrierCreateRequirement; do
    grep -qE " T $n(@|$)" <<<"$syms" || weak+="$n "
  done
  [ -z "$weak" ] || shtest_fail "served calls that are not strong definitions: $weak"
}

# The library's SONAME is NCCL's, so LD_PRELOAD / LD_LIBRARY_PATH replace NCCL with it.
soname_is_nccls() {
  need_lib
  objdump -p "$lib" | grep -qE 'SONAME +libnccl\.so\.2$' || shtest_fail "SONAME is not libnccl.so.2"
}

shtest_case stubs_cover_header stubs_cover_header
shtest_case exports_match_header exports_match_header
shtest_case served_are_strong served_are_strong
shtest_case soname_is_nccls soname_is_nccls
shtest_main "$@"
