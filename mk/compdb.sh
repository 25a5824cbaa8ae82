#!/usr/bin/env bash
# make compdb: compile_commands.json (stdout) for clangd and other tools, from the compile lines
# this Makefile would run (make -n -B), for the backend given first and then the other one: each
# file appears once, with the first backend's flags; sim/src only builds for BACKEND=sim.
set -euo pipefail
cd "$(dirname "$0")/.."
first=${1:-sim}
other=$([ "$first" = sim ] && echo cuda || echo sim)
for b in "$first" "$other"; do
  # -B: every rule, as on a clean tree; BUILD_ROOT in /tmp so nothing here is touched.
  env -u MAKEFLAGS -u MAKELEVEL make --no-print-directory -n -B BACKEND="$b" BUILD_ROOT=/tmp/minccl-compdb all 2>/dev/null |
    grep -E '^gcc .* -c [^ ]+\.c ' || true
done | python3 -c '
import json, os, shlex, sys
root, seen, out = os.getcwd(), set(), []
for line in sys.stdin:
    args = shlex.split(line)
    src = args[args.index("-c") + 1]
    if src in seen: continue
    seen.add(src)
    out.append({"directory": root, "file": os.path.join(root, src), "arguments": args})
json.dump(out, sys.stdout, indent=1)
print()'
