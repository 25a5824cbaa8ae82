#!/usr/bin/env python3
"""Charts of allreduce benchmark results (`make plot RESULTS=...`).

Reads the CSV or JSON files that `mpi_bench_allreduce --csv/--json` writes (common/include/
mccl_benchout.h: metadata, then one record per row and placement) and writes, for each file, PNG
charts beside it (or in --out-dir):
  <name>-latency.png  time per call (us) against size, 8 B - 256 KiB, log-log
  <name>-busbw.png    bus bandwidth (GB/s) against size, 256 KiB and up, log x
minccl's algorithms and NCCL's rows on the same axes, one line each; the title names the device,
driver, commit and NCCL version from the file's metadata. Rows with wrong data are left out (and
counted on stderr). A chart whose size range holds no row is not written.
"""
import argparse
import csv
import json
import os
import sys

SMALL_MAX = 256 * 1024  # the latency chart: sizes up to this; the bandwidth chart: from it


class Bad(Exception):
    """An input that cannot be charted: reported, the other inputs are still drawn, the exit is 2."""


def fail(msg):
    raise Bad(msg)


def read_csv(path):
    meta, lines = {}, []
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("#"):
                key, sep, value = line[1:].partition(":")
                if sep:
                    meta[key.strip()] = value.strip()
            elif line.strip():
                lines.append(line)
    rows = list(csv.DictReader(lines))
    return meta, rows


def read_json(path):
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        fail("%s: not a benchmark JSON file (no \"rows\" list)" % path)
    return doc.get("metadata") or {}, doc["rows"]


def number(v):
    if v is None or v == "":
        return None
    return float(v)


def load(path):
    try:
        with open(path) as f:
            first = f.read(1)
    except OSError as e:
        fail("%s: %s" % (path, e.strerror))
    try:
        meta, raw = read_json(path) if first == "{" else read_csv(path)
    except (ValueError, csv.Error) as e:
        fail("%s: cannot parse: %s" % (path, e))
    need = ("size", "type", "redop", "lib", "variant", "placement", "time_us", "busbw", "wrong")
    rows = []
    for i, r in enumerate(raw):
        missing = [k for k in need if k not in r]
        if missing:
            fail("%s: record %d has no %s (written by an older benchmark?)" % (path, i + 1, ", ".join(missing)))
        try:
            rows.append(dict(r, size=int(r["size"]), time_us=number(r["time_us"]), busbw=number(r["busbw"]),
                             wrong=number(r["wrong"])))
        except ValueError as e:
            fail("%s: record %d: %s" % (path, i + 1, e))
    return meta, rows


def size_label(b, _pos=None):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            v = b / n
            return ("%d %s" if v == int(v) else "%.1f %s") % (v, unit)
    return "%d B" % b


def title(meta, what, combo, placement):
    first = "%s, %s" % (what, combo + (" in-place" if placement == "ip" else ", out-of-place"))
    parts = []
    if meta.get("nranks"):
        parts.append("%s ranks" % meta["nranks"])
    if meta.get("hosts"):  # allreduce_perf --hosts: the net path (minccl's NET, NCCL's network)
        parts.append("posed as %s hosts" % meta["hosts"].split(",")[0])
    dev = meta.get("device")
    if dev:
        sim = meta.get("backend") == "sim" and "sim" not in dev
        parts.append(dev + (" (sim backend)" if sim else ""))
    for key, label in (("driver", "driver "), ("nccl", "NCCL "), ("commit", "commit "), ("date", "")):
        if meta.get(key):
            v = meta[key][:10] if key in ("date", "commit") else meta[key]  # a day; a short hash
            parts.append(label + v)
    if meta.get("timing", "").startswith("CUDA graph"):
        parts.append("CUDA graph")
    lines, line = [], ""
    for p in parts:  # lines of at most about 110 characters: the figure is 10 inches wide
        if line and len(line) + 2 + len(p) > 110:
            lines.append(line)
            line = p
        else:
            line = line + ", " + p if line else p
    if line:
        lines.append(line)
    return "\n".join([first] + lines)


def series(rows):
    """(lib, variant) -> sorted [(size, row)], NCCL's series first."""
    out = {}
    for r in rows:
        out.setdefault((r["lib"], r["variant"]), []).append((r["size"], r))
    return sorted(((k, sorted(v, key=lambda p: p[0])) for k, v in out.items()), key=lambda kv: (kv[0][0] != "nccl", kv[0][1]))


def chart(plt, meta, rows, combo, placement, small, path):
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    pick = [r for r in rows if (r["size"] <= SMALL_MAX if small else r["size"] >= SMALL_MAX)]
    key = "time_us" if small else "busbw"
    pick = [r for r in pick if r[key] is not None and r[key] > 0]
    if not pick:
        return False
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    minccl_styles = ["o-", "s-", "^-", "D-", "v-", "P-", "X-"]
    n = 0
    for (lib, variant), pts in series(pick):
        xs = [s for s, _ in pts]
        ys = [r[key] for _, r in pts]
        if lib == "nccl":
            ax.plot(xs, ys, "k--" if variant == "nccl" else "k:", marker="x", linewidth=1.8,
                    label="NCCL (%s)" % variant)
        else:
            ax.plot(xs, ys, minccl_styles[n % len(minccl_styles)], markersize=4, linewidth=1.4,
                    label="minccl %s" % variant)
            n += 1
    ax.set_xscale("log", base=2)
    sizes = sorted({r["size"] for r in pick})
    if len(sizes) <= 12:  # a tick at each measured size
        ax.xaxis.set_major_locator(FixedLocator(sizes))
        ax.xaxis.set_minor_locator(NullLocator())
    else:
        ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.set_xlabel("message size")
    if small:
        ax.set_yscale("log")
        ax.set_ylabel("time per call (us, lower is better)")
        what = "allreduce latency"
    else:
        ax.set_ylim(bottom=0)
        ax.set_ylabel("bus bandwidth (GB/s, higher is better)")
        what = "allreduce bus bandwidth"
    ax.set_title(title(meta, what, combo, placement), fontsize=10)
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.15)
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Writes <name>-latency.png and <name>-busbw.png per input.")
    ap.add_argument("inputs", nargs="+", metavar="FILE", help="a .csv or .json results file")
    ap.add_argument("--out-dir", help="where the PNGs go (default: beside each input)")
    ap.add_argument("--placement", choices=("oop", "ip"), default="oop", help="out-of-place or in-place rows [oop]")
    ap.add_argument("--type", help="element type to draw [the file's first]")
    ap.add_argument("--redop", help="reduction to draw [the file's first]")
    args = ap.parse_args()
    try:
        import matplotlib
    except ImportError:
        print("plot: matplotlib is not installed for %s: run make deps (Debian package python3-matplotlib)" %
              sys.executable, file=sys.stderr)
        sys.exit(3)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
    written, bad = 0, 0
    for path in args.inputs:
        try:
            written += draw(plt, path, args)
        except Bad as e:
            print("plot: %s" % e, file=sys.stderr)
            bad += 1
    if bad or written == 0:
        sys.exit(2)


def draw(plt, path, args):
    written = 0
    meta, rows = load(path)
    if not rows:
        fail("%s: no records" % path)
    typ = args.type or rows[0]["type"]
    redop = args.redop or rows[0]["redop"]
    sel = [r for r in rows if r["type"] == typ and r["redop"] == redop and r["placement"] == args.placement]
    if not sel:
        fail("%s: no %s %s %s records" % (path, typ, redop, args.placement))
    bad = [r for r in sel if r["wrong"] is not None and r["wrong"] > 0]
    if bad:
        print("plot: %s: %d records with wrong data left out" % (path, len(bad)), file=sys.stderr)
    sel = [r for r in sel if not (r["wrong"] is not None and r["wrong"] > 0)]
    stem = os.path.splitext(os.path.basename(path))[0]
    outdir = args.out_dir or os.path.dirname(os.path.abspath(path))
    combo = "%s %s" % (typ, redop)
    for small, suffix in ((True, "latency"), (False, "busbw")):
        out = os.path.join(outdir, "%s-%s.png" % (stem, suffix))
        if chart(plt, meta, sel, combo, args.placement, small, out):
            print("plot: wrote %s" % out)
            written += 1
        else:
            print("plot: %s: no %s sizes %s 256 KiB: no %s chart" %
                  (path, combo, "up to" if small else "from", suffix))
    if written == 0:
        fail("%s: no chart written" % path)
    return written


if __name__ == "__main__":
    main()
