#!/usr/bin/env python3
"""Summary page of one GPU run, from the logs mk/gpu-run.sh wrote (env.txt, test.log, bench.log)
and a sim `make bench` log (sim-bench.log) in the same folder. Every figure is read from those logs.
Usage: mk/results-md.py docs/results/<run-folder>  > docs/results/<run-folder>.md"""
import os, re, sys

d = sys.argv[1]
name = os.path.basename(d.rstrip("/"))
read = lambda f: open(os.path.join(d, f)).read() if os.path.exists(os.path.join(d, f)) else ""
env, test, bench, sim = read("env.txt"), read("test.log"), read("bench.log"), read("sim-bench.log")

def field(text, key):
    m = re.search(r"^%s:\s*(.*)$" % re.escape(key), text, re.M)
    return m.group(1).strip() if m else "?"

def section(text, title):  # the lines of one benchmark's output
    m = re.search(r"^# ==== %s.*?$(.*?)(?=^# ==== |\Z)" % re.escape(title), text, re.M | re.S)
    return m.group(1) if m else ""

def rows(text, first=None):  # numeric table rows: size -> list of fields
    out = {}
    for line in text.splitlines():
        f = line.split()
        if f and f[0].isdigit() and (first is None or f[0] == first):
            out.setdefault(f[0], []).append(f)
    return out

def size(n):
    n = int(n)
    return "%d GiB" % (n >> 30) if n >= 1 << 30 else "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)

gpus = re.findall(r"^\d+, (NVIDIA [^,]+), ([\d.]+), (\d+ MiB)", env, re.M)
topo = "NV18" if "NV18" in env else "?"
closing = [l for l in test.splitlines() if re.match(r"^\d+ passed, \d+ failed, \d+ skipped$", l)]
skips = [l for l in test.splitlines() if l.startswith("SKIP ")]
fails = [l for l in test.splitlines() if l.startswith("FAIL ")]
simclose = [l for l in sim.splitlines() if re.match(r"^\d+ passed", l)]
p = print
p("# %s: labs 01–05 on %dx %s\n" % (name[:10], len(gpus), gpus[0][0] if gpus else "?"))
p("| | |\n| --- | --- |")
p("| date | %s |" % field(env, "date"))
p("| device | %s |" % ", ".join("%s (%s)" % (g[0], g[2]) for g in gpus) + "")
p("| link between GPUs | %s (nvidia-smi topo -m) |" % topo)
p("| driver | %s |" % (gpus[0][1] if gpus else "?"))
p("| toolchain | nvcc %s; %s |" % (field(env, "nvcc"), field(env, "mpirun")))
p("| NCCL library | `%s` |" % field(env, "NCCL library"))
p("| commit | %s |" % field(env, "commit"))
p("| command | `MCCL_COMMIT=<commit> mk/gpu-run.sh` (make BACKEND=cuda all, test, demo, bench) |")
p("| raw output | [env.txt](%s/env.txt), [test.log](%s/test.log), [bench.log](%s/bench.log), [demo.log](%s/demo.log), sim: [sim-bench.log](%s/sim-bench.log) |" % ((name,) * 5))
p("\n## Tests\n`make BACKEND=cuda test`: **%s**." % (closing[-1] if closing else "no closing line"))
if fails:
    p("\nFailures:\n" + "\n".join("- `%s`" % l for l in fails))
p("\nSkipped:\n" + "\n".join("- `%s`" % l[5:] for l in skips))

p("\n## Benchmarks\nGPU figures from bench.log; sim figures from sim-bench.log (2 shared CPU cores: they time the")
p("CPU implementation, not a GPU).")
a, sa = rows(section(bench, "01_vmm_alloc")), rows(section(sim, "01_vmm_alloc"))
p("\n### Lab 01: allocation cost, median µs of host time\n")
p("| size | VMM alloc | VMM free | cudaMalloc | cudaFree | of which cuMemSetAccess | sim VMM alloc | sim cudaMalloc |")
p("| --- | --- | --- | --- | --- | --- | --- | --- |")
for s, r in a.items():
    g, st = r[0], r[1] if len(r) > 1 else None
    sv = sa.get(s, [[None] * 5])[0]
    p("| %s | %s | %s | %s | %s | %s | %s | %s |" % (size(s), g[1], g[2], g[3], g[4], st[4] if st else "-", sv[1] or "-", sv[3] or "-"))
h, sh = rows(section(bench, "02_host_numa")), rows(section(sim, "02_host_numa"))
p("\n### Lab 02: host↔device copy bandwidth, GB/s\n")
p("| size | pageable H2D | cudaHostAlloc H2D | cuMem host-NUMA H2D | pageable D2H | cudaHostAlloc D2H | cuMem host-NUMA D2H | sim host-NUMA H2D |")
p("| --- | --- | --- | --- | --- | --- | --- | --- |")
for s in ("1048576", "16777216", "268435456"):
    if s in h:
        g = h[s][0]
        p("| %s | %s | %s | %s | %s | %s | %s | %s |" % (size(s), g[1], g[2], g[3], g[4], g[5], g[6], sh.get(s, [["-"] * 4])[0][3]))
def ipc(text):
    out = {}
    for k, pat in (("export", r"export \(.*?\)\s+\d+\s+([\d.]+)"), ("import", r"import\+map \(.*?\)\s+\d+\s+([\d.]+)"),
                   ("unmap", r"unmap \(.*?\)\s+\d+\s+([\d.]+)"), ("peer", r"peer read \(.*?\)\s+\d+\s+[\d.]+\s+([\d.]+)")):
        m = re.search(pat, text)
        out[k] = m.group(1) if m else "-"
    return out
gi, si = ipc(bench), ipc(sim)
p("\n### Lab 03: export/import of 256 MiB and peer read through the imported mapping\n")
p("| operation | GPU | sim |\n| --- | --- | --- |")
p("| export (mcclIpcExport + close) | %s µs | %s µs |" % (gi["export"], si["export"]))
p("| import + map (mcclIpcImport) | %s µs | %s µs |" % (gi["import"], si["import"]))
p("| unmap (mcclIpcUnmap) | %s µs | %s µs |" % (gi["unmap"], si["unmap"]))
p("| peer read, device 1 ← device 0 (cudaMemcpyAsync D2D) | %s GB/s | %s GB/s (host memcpy) |" % (gi["peer"], si["peer"]))
b4, s4 = rows(section(bench, "04_shm_transport")), rows(section(sim, "04_shm_transport"))
p("\n### Lab 04: device→device through the SHM slots, host-driven, GB/s\n")
p("| size | one way | both ways (each) | copy-engine ceiling | sim one way | sim both ways |\n| --- | --- | --- | --- | --- | --- |")
for s, r in b4.items():
    g = r[0]
    sv = s4.get(s, [["-"] * 3])[0]
    p("| %s | %s | %s | %s | %s | %s |" % (size(s), g[1], g[2], g[3], sv[1], sv[2]))
b5, s5 = section(bench, "05_proxy"), section(sim, "05_proxy")
def p2p(text):
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 10 and f[0].isdigit() and f[3] in ("0->1", "bothways"):
            out[(f[0], f[3])] = f
    return out
g5, t5 = p2p(b5), p2p(s5)
p("\n### Lab 05: SHM send/recv driven by the proxy (copy-engine mode), beside NCCL in the same run\n")
m = re.search(r"^# settings: (.*)$", b5, re.M)
p("Settings: %s. NCCL: `ncclSend`/`ncclRecv` with `NCCL_P2P_DISABLE=1` (its SHM transport), loaded with dlopen." % (m.group(1) if m else "?"))
p("GB/s per direction (nccl-tests' algbw; busbw is the same for point-to-point).\n")
p("| size | ours one way | NCCL one way | ratio | ours both ways | NCCL both ways | ratio | sim one way |")
p("| --- | --- | --- | --- | --- | --- | --- | --- |")
for s in sorted({k[0] for k in g5}, key=int):
    o, b = g5.get((s, "0->1")), g5.get((s, "bothways"))
    sv = t5.get((s, "0->1"))
    if o and b:
        p("| %s | %s | %s | %s | %s | %s | %s | %s |" % (size(s), o[6], o[8], o[9], b[6], b[8], b[9], sv[6] if sv else "-"))
o256, b256 = g5.get(("268435456", "0->1")), g5.get(("268435456", "bothways"))
if o256 and b256:
    p("\nAt 256 MiB: one way %s GB/s (NCCL %s, ratio %s); both ways %s GB/s each (NCCL %s, ratio %s)." %
      (o256[6], o256[8], o256[9], b256[6], b256[8], b256[9]))
for label, text in (("GPU host", b5), ("sim machine", s5)):
    m = re.search(r"idle proxy.*?: ([\d.]+% of one core)", text)
    if m: p("Idle proxy (service + progress threads) after the run, %s: %s." % (label, m.group(1)))
notes = read("notes.md")
if notes:
    p("\n" + notes.rstrip())
