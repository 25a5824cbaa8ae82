#!/usr/bin/env bash
# Prints every thread's backtrace of process PID, one block per distinct stack (threads with the same frames
# are counted, not repeated: a sim kernel runs a thread per GPU thread), as '#' lines for a test log.
# Uses gdb, else cuda-gdb (a GPU host has no gdb). mk/runtests.sh calls it for a test about to time out.
# Usage: mk/stacks.sh PID
set -u
pid=$1
dbg=$(command -v gdb || command -v cuda-gdb || echo "${CUDA_HOME:-/usr/local/cuda}/bin/cuda-gdb")
if [ ! -x "$dbg" ]; then echo "# stacks: no gdb or cuda-gdb here"; exit 0; fi
out=$(timeout 30 "$dbg" -q -batch -nx -p "$pid" -ex 'thread apply all bt' </dev/null 2>&1)
if ! grep -q '^Thread [0-9]' <<<"$out"; then
  echo "# stacks: ${dbg##*/} could not read pid $pid:"; tail -3 <<<"$out" | sed 's/^/#   /'; exit 0
fi
awk 'function flush() {
       if (hdr == "") return
       if (!(key in count)) { order[++n] = key; first[key] = hdr; frames[key] = body }
       count[key]++; hdr = ""
     }
     /^Thread [0-9]/ { flush(); hdr = $0; body = ""; key = ""; next }
     /^#[0-9]+ / && hdr != "" {
       body = body "\n" substr($0, 1, 300)
       f = $0; sub(/ \(.*$/, "", f); sub(/^#[0-9]+ +(0x[0-9a-f]+ in )?/, "", f); key = key "|" f
     }
     END {
       flush()
       for (i = 1; i <= n; i++) {
         k = order[i]
         printf "%s%s%s\n", first[k], (count[k] > 1 ? " and " (count[k] - 1) " more with these frames" : ""), frames[k]
       }
     }' <<<"$out" | sed 's/^/#   /'
