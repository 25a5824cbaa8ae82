#!/usr/bin/env bash
# make install PREFIX=... puts libminccl, its headers and minccl.pc in place, and a program outside
# the tree (final/tests/pkgconfig/allreduce_example.c) builds against the installed copy with
# `pkg-config --cflags --libs minccl` alone and runs: its allreduce over the devices present is
# right. The same with the static library (pkg-config --static).
. "$(dirname "$0")/../../common/tests/shtest_lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$shtest_msg"' EXIT

installAndBuildOutside() {
  command -v pkg-config >/dev/null || shtest_skip "pkg-config not installed (make deps)"
  shtest_make install PREFIX="$tmp/prefix" >"$tmp/install.log" 2>&1 || shtest_fail "make install failed: $(tail -n 3 "$tmp/install.log" | tr '\n' ' ')"
  for f in include/minccl.h include/mccl_result.h include/mccl_types.h lib/libminccl.so lib/libminccl.a lib/libmccl-net-mpi.so lib/pkgconfig/minccl.pc; do
    [ -e "$tmp/prefix/$f" ] || shtest_fail "$f not installed"
  done
  mkdir -p "$tmp/app" && cp final/tests/pkgconfig/allreduce_example.c "$tmp/app/"
  export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
  local flags
  flags=$(pkg-config --cflags --libs minccl) || shtest_fail "pkg-config --cflags --libs minccl failed"
  (cd "$tmp/app" && cc -std=c11 -Wall -Werror -o example allreduce_example.c $flags) >"$tmp/cc.log" 2>&1 ||
    shtest_fail "building against the installed copy failed: $(head -n 5 "$tmp/cc.log" | tr '\n' ' ')"
  # It runs from the installed libraries, not from the build tree.
  ldd "$tmp/app/example" | grep -q "$tmp/prefix/lib/libminccl.so" || shtest_fail "the example does not load the installed libminccl.so"
  "$tmp/app/example" >"$tmp/run.log" 2>&1 || shtest_fail "the example failed: $(tail -n 3 "$tmp/run.log" | tr '\n' ' ')"
  grep -q ': ok$' "$tmp/run.log" || shtest_fail "the example's allreduce was wrong: $(cat "$tmp/run.log")"
  # Static: the archive and the private libraries.
  flags="$(pkg-config --cflags minccl) $tmp/prefix/lib/libminccl.a $(pkg-config --static --libs minccl | sed 's/-lminccl//')"
  (cd "$tmp/app" && cc -std=c11 -Wall -Werror -o example-static allreduce_example.c $flags) >"$tmp/cc.log" 2>&1 ||
    shtest_fail "static build failed: $(head -n 5 "$tmp/cc.log" | tr '\n' ' ')"
  ! ldd "$tmp/app/example-static" | grep -q libminccl || shtest_fail "the static example loads libminccl.so"
  "$tmp/app/example-static" >"$tmp/run.log" 2>&1 && grep -q ': ok$' "$tmp/run.log" ||
    shtest_fail "the static example failed: $(tail -n 3 "$tmp/run.log" | tr '\n' ' ')"
}

shtest_case installAndBuildOutside installAndBuildOutside
shtest_main "$@"
