#!/usr/bin/env python3
"""nccl-tests logs of mk/gpu-run.sh's nt-sweep folders -> one CSV on stdout.
Usage: nt2csv.py LABEL=DIR ... (DIR holds nt-sweep/*.log; LABEL names the run, e.g. np4-aligned)."""
import glob, os, re, sys
print("run,test,library,variant,bytes,oop_us,oop_busbw,ip_us,ip_busbw,wrong")
for arg in sys.argv[1:]:
    label, d = arg.split("=", 1)
    for f in sorted(glob.glob(os.path.join(d, "nt-sweep", "*.log"))):
        b = os.path.basename(f)[:-4]
        if b.startswith("build"): continue
        m = re.match(r"nccl_(\w+_perf)_\d+$", b)
        if m: test, lib, var = m.group(1), "NCCL", "-"
        else:
            m = re.match(r"(MCCL_[A-Z]+)_(\w+?)_(\w+_perf)_\d+$", b)
            test, lib, var = m.group(3), "minccl", m.group(1) + "=" + m.group(2)
        for line in open(f):
            x = line.split()
            if len(x) >= 13 and x[0].isdigit() and x[1].isdigit():
                print(",".join([label, test, lib, var, x[0], x[5], x[7], x[9], x[11], str(int(x[8]) + int(x[12]))]))
