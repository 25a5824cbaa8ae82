#!/usr/bin/env python3
"""PyTorch's "nccl" backend on minccl's libnccl.so.2, unmodified: the drop-in serves a real client.

Run on a host with 2 GPUs and torch, with the drop-in preloaded:

    LD_PRELOAD=$PWD/build/cuda/lib/libnccl.so.2 NCCL_NVLS_ENABLE=0 \\
        torchrun --nproc_per_node 2 final/tests/torch_dropin.py

Each rank runs init_process_group("nccl"), all_reduce (sum, avg, max on float32, bfloat16 and int64,
1 to 256 Mi elements; a PreMulSum op from _make_nccl_premul_sum with each rank's own factor, on float32
and float16 as a Python float and as a device tensor, on bfloat16 as a Python float, which torch passes
as a float that NCCL reads 2 bytes of), all_gather, reduce_scatter (sum; avg; PreMulSum), broadcast,
all_to_all_single (even and uneven splits), all_to_all, gather and scatter (roots 0 and last), barrier,
a sub-group's all_reduce and destroy_process_group, and checks every result against values computed
locally. It fails when NCCL
rather than minccl served the calls: minccl's library exports mcclDropinCalls (NCCL's does not), its
count of served calls must grow with the calls made, and the preloaded drop-in must be mapped (torch's
own libnccl is mapped too, as libtorch_cuda's dependency, and reported; it serves no call). Rank 0
prints a PASS/FAIL line per check and the counts; the exit status is 1 if any check failed on any rank.
MCCL_TORCH_MAX_LOG2 (default 28) caps the largest size at 2^N elements.
"""
import ctypes
import os
import sys
import time

import torch
import torch.distributed as dist

SIZES = [1, 1023, 1 << 20, 1 << 24, 1 << 28]
DTYPES = [torch.float32, torch.bfloat16, torch.int64]
OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX}


def dropin_calls():
    """minccl's count of served NCCL calls, or None when the process's libnccl is not minccl's."""
    try:
        f = ctypes.CDLL(None).mcclDropinCalls
    except AttributeError:
        return None
    f.restype = ctypes.c_ulonglong
    return f()


def mapped_libnccl():
    """Paths of every libnccl* mapped into this process."""
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if "libnccl" in line.split()[-1]})


def pattern(rank, n, dtype, device):
    """Rank r's input: small integers (exact in bfloat16, sums and halves of them too)."""
    return ((torch.arange(n, device=device, dtype=torch.int64) % 7) + 3 * rank + 1).to(dtype)


def expected_allreduce(op, world, n, dtype, device):
    parts = [pattern(r, n, torch.float64, device) for r in range(world)]
    if op == "max":
        acc = torch.stack(parts).amax(0)
    else:
        acc = torch.stack(parts).sum(0)
        if op == "avg":
            acc = acc / world
            if not dtype.is_floating_point:
                acc = torch.floor(acc)  # NCCL's integer average divides with truncation
    return acc.to(dtype)


class Checks:
    def __init__(self, rank, world):
        self.rank, self.world, self.results = rank, world, []

    def run(self, name, fn):
        t0 = time.time()
        try:
            msg = fn()
        except Exception as e:  # a DistBackendError from an ncclInvalidUsage stub lands here too
            msg = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        ok = torch.tensor([0 if msg is None else 1], device="cuda")
        # Combine over ranks with a plain all_reduce (itself served by minccl); if the backend is
        # broken, fall back to this rank's own verdict.
        try:
            dist.all_reduce(ok, op=dist.ReduceOp.MAX)
            torch.cuda.synchronize()
        except Exception:
            pass
        failed = ok.item() != 0
        self.results.append(failed)
        if self.rank == 0:
            if failed:
                print("FAIL torch_dropin.%s (%s)" % (name, msg or "failed on another rank"), flush=True)
            else:
                print("PASS torch_dropin.%s (%.0f ms)" % (name, (time.time() - t0) * 1e3), flush=True)
        elif failed and msg:
            print("rank %d: torch_dropin.%s: %s" % (self.rank, name, msg), file=sys.stderr, flush=True)


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    max_log2 = int(os.environ.get("MCCL_TORCH_MAX_LOG2", "28"))
    sizes = [n for n in SIZES if n <= (1 << max_log2)]

    before = dropin_calls()
    if before is None:
        print("FAIL torch_dropin.served_by_minccl (mcclDropinCalls is not defined: libnccl.so.2 is not "
              "minccl's; preload it: LD_PRELOAD=build/cuda/lib/libnccl.so.2)", flush=True)
        return 1
    dist.init_process_group("nccl", device_id=dev)
    checks = Checks(rank, world)

    # libtorch_cuda depends on its bundled libnccl.so.2, so the loader maps that file too (torch 2.x);
    # every ncclX symbol still binds to the preloaded library, which comes first
    # in lookup order; served_by_minccl checks that minccl's call counter grew with the calls (at least
    # 30). Here the drop-in must be mapped, and NCCL's copy, if mapped, is reported.
    def served():
        libs = mapped_libnccl()
        preload = os.path.realpath(os.environ.get("LD_PRELOAD", "").split(":")[0])
        mine = [p for p in libs if os.path.realpath(p) == preload]
        if not mine:
            return "libnccl mapped: %s; the preloaded drop-in %s is not among them" % (libs, preload)
        others = [p for p in libs if os.path.realpath(p) != preload]
        if others and rank == 0:
            print("# also mapped (a dependency of libtorch_cuda, bound to nothing): %s" % others, flush=True)
        return None
    checks.run("dropin_mapped", served)

    for dtype in DTYPES:
        for opname, op in OPS.items():
            def allreduce(dtype=dtype, opname=opname, op=op):
                for n in sizes:
                    t = pattern(rank, n, dtype, dev)
                    dist.all_reduce(t, op=op)
                    want = expected_allreduce(opname, world, n, dtype, dev)
                    if not torch.equal(t, want):
                        bad = (t != want).nonzero()[0].item()
                        return "n=%d: element %d is %s, expected %s" % (n, bad, t[bad].item(), want[bad].item())
                    del t, want
                return None
            checks.run("all_reduce_%s_%s" % (opname, str(dtype).replace("torch.", "")), allreduce)

    def all_gather():
        for n in (1, 1000, 1 << 22):
            t = pattern(rank, n, torch.float32, dev)
            out = torch.empty(n * world, dtype=torch.float32, device=dev)
            dist.all_gather_into_tensor(out, t)
            want = torch.cat([pattern(r, n, torch.float32, dev) for r in range(world)])
            if not torch.equal(out, want):
                return "n=%d: gathered tensor differs" % n
        return None
    checks.run("all_gather", all_gather)

    def reduce_scatter():
        for n in (1, 1000, 1 << 22):
            t = pattern(rank, n * world, torch.float32, dev)
            out = torch.empty(n, dtype=torch.float32, device=dev)
            dist.reduce_scatter_tensor(out, t, op=dist.ReduceOp.SUM)
            want = expected_allreduce("sum", world, n * world, torch.float32, dev)[rank * n:(rank + 1) * n]
            if not torch.equal(out, want):
                return "n=%d: this rank's block differs" % n
        return None
    checks.run("reduce_scatter", reduce_scatter)

    def broadcast():
        for root in range(world):
            for n in (1, 1 << 22):
                t = pattern(rank, n, torch.bfloat16, dev)
                dist.broadcast(t, src=root)
                if not torch.equal(t, pattern(root, n, torch.bfloat16, dev)):
                    return "root %d n=%d: differs from the root's tensor" % (root, n)
        return None
    checks.run("broadcast", broadcast)

    def block(src, dst, n):
        """What rank src sends to rank dst: n int64 values that name both (exact, unlike large floats)."""
        return torch.arange(n, device=dev, dtype=torch.int64) + src * 1_000_000_000 + dst * 10_000_000

    def all_to_all_even():
        for n in (1, 1000, 1 << 20):
            t = torch.cat([block(rank, q, n) for q in range(world)])
            out = torch.full((world * n,), -1, dtype=torch.int64, device=dev)
            dist.all_to_all_single(out, t)
            want = torch.cat([block(q, rank, n) for q in range(world)])
            if not torch.equal(out, want):
                bad = (out != want).nonzero()[0].item()
                return "n=%d: element %d is %d, expected %d" % (n, bad, out[bad].item(), want[bad].item())
        return None
    checks.run("all_to_all_single_even", all_to_all_even)

    def all_to_all_uneven():
        def split(src, dst):  # elements src sends to dst: 0 to 6006, a different count for every pair
            return ((src * 3 + dst * 5) % 7) * 1001
        ins = [split(rank, q) for q in range(world)]
        outs = [split(q, rank) for q in range(world)]
        t = torch.cat([block(rank, q, ins[q]) for q in range(world)])
        out = torch.full((sum(outs),), -1, dtype=torch.int64, device=dev)
        dist.all_to_all_single(out, t, output_split_sizes=outs, input_split_sizes=ins)
        want = torch.cat([block(q, rank, outs[q]) for q in range(world)])
        if not torch.equal(out, want):
            bad = (out != want).nonzero()[0].item()
            return "splits in %s out %s: element %d is %d, expected %d" % (ins, outs, bad, out[bad].item(),
                                                                         want[bad].item())
        return None
    checks.run("all_to_all_single_uneven", all_to_all_uneven)

    def all_to_all_list():
        ins = [block(rank, q, 1000 + q) for q in range(world)]  # rank q gets 1000 + q from everyone
        outs = [torch.full((1000 + rank,), -1, dtype=torch.int64, device=dev) for _ in range(world)]
        dist.all_to_all(outs, ins)
        for q in range(world):
            if not torch.equal(outs[q], block(q, rank, 1000 + rank)):
                return "the tensor from rank %d differs" % q
        return None
    checks.run("all_to_all", all_to_all_list)

    def gather():
        for root in sorted({0, world - 1}):
            for n in (1, 1000, 1 << 20):
                lst = [torch.full((n,), -1, dtype=torch.int64, device=dev) for _ in range(world)] \
                    if rank == root else None
                dist.gather(block(rank, root, n), gather_list=lst, dst=root)
                for q in range(world if rank == root else 0):
                    if not torch.equal(lst[q], block(q, root, n)):
                        return "root %d n=%d: the tensor of rank %d differs" % (root, n, q)
        return None
    checks.run("gather", gather)

    def scatter():
        for root in sorted({0, world - 1}):
            for n in (1, 1000, 1 << 20):
                out = torch.full((n,), -1, dtype=torch.int64, device=dev)
                lst = [block(root, q, n) for q in range(world)] if rank == root else None
                dist.scatter(out, scatter_list=lst, src=root)
                if not torch.equal(out, block(root, rank, n)):
                    return "root %d n=%d: this rank's tensor differs" % (root, n)
        return None
    checks.run("scatter", scatter)

    def close(got, want, dtype, exact):
        """Equal where every rounding is exact (avg over a power-of-two world), else within the rounding
        of world products and sums in dtype (NCCL's avg multiplies each input by 1/world, then sums)."""
        if exact:
            return torch.equal(got, want)
        tol = 2 * world * torch.finfo(dtype).eps * want.double().abs().max().item()
        return (got.double() - want.double()).abs().max().item() <= tol

    def reduce_scatter_avg():
        for dtype in (torch.float32, torch.bfloat16):
            for n in (1, 1000, 1 << 22):
                t = pattern(rank, n * world, dtype, dev)
                out = torch.empty(n, dtype=dtype, device=dev)
                dist.reduce_scatter_tensor(out, t, op=dist.ReduceOp.AVG)
                want = expected_allreduce("avg", world, n * world, dtype, dev)[rank * n:(rank + 1) * n]
                if not close(out, want, dtype, world & (world - 1) == 0):
                    return "%s n=%d: this rank's block differs" % (str(dtype).replace("torch.", ""), n)
        return None
    checks.run("reduce_scatter_avg", reduce_scatter_avg)

    premul = getattr(dist, "_make_nccl_premul_sum", None)
    if premul is None:  # older torch keeps it in the C extension only
        premul = getattr(torch._C._distributed_c10d, "_make_nccl_premul_sum", None)

    def factor(r):
        return 1.0 + (r & 1)  # the ranks' factors differ

    def expected_premul(n, dtype):
        parts = [factor(r) * pattern(r, n, torch.float64, dev) for r in range(world)]
        return torch.stack(parts).sum(0).to(dtype)  # small integers: exact in bfloat16 too

    def bf16_host_factor(r):
        # torch hands NCCL a float for a bfloat16 PreMulSum (unpackPreMulSum<float, ncclBfloat16>), and
        # ncclRedOpCreatePreMulSum reads the type's size of it, 2 bytes: the float's low half, which is 0
        # for 1.0 and 2.0. NCCL scales by that; so must the drop-in.
        bits = torch.tensor([factor(r)], dtype=torch.float32).view(torch.int32).item() & 0xFFFF
        return torch.tensor([bits], dtype=torch.int16).view(torch.bfloat16).double().item()

    def premul_sum_all_reduce():
        if premul is None:
            return "torch.distributed has no _make_nccl_premul_sum"
        cases = [(torch.float32, "host"), (torch.float32, "device"), (torch.float16, "host"), (torch.float16, "device"),
                 (torch.bfloat16, "host")]  # not a bfloat16 device factor: torch reads the tensor as float
        for dtype, residence in cases:
            # A Python float becomes ncclScalarHostImmediate, a one-element tensor ncclScalarDevice.
            f = factor(rank) if residence == "host" else torch.tensor([factor(rank)], dtype=dtype, device=dev)
            for n in (1, 1023, 1 << 20):
                t = pattern(rank, n, dtype, dev)
                dist.all_reduce(t, op=premul(f))
                if dtype == torch.bfloat16:
                    parts = [bf16_host_factor(r) * pattern(r, n, torch.float64, dev) for r in range(world)]
                    want = torch.stack(parts).sum(0).to(dtype)
                else:
                    want = expected_premul(n, dtype)
                if not torch.equal(t, want):
                    bad = (t != want).nonzero()[0].item()
                    return "%s %s factor n=%d: element %d is %s, expected %s" % (
                        str(dtype).replace("torch.", ""), residence, n, bad, t[bad].item(), want[bad].item())
        return None
    checks.run("all_reduce_premul_sum", premul_sum_all_reduce)

    def premul_sum_reduce_scatter():
        if premul is None:
            return "torch.distributed has no _make_nccl_premul_sum"
        for n in (1, 1000, 1 << 20):
            t = pattern(rank, n * world, torch.float32, dev)
            out = torch.empty(n, dtype=torch.float32, device=dev)
            dist.reduce_scatter_tensor(out, t, op=premul(factor(rank)))
            want = expected_premul(n * world, torch.float32)[rank * n:(rank + 1) * n]
            if not torch.equal(out, want):
                return "n=%d: this rank's block differs" % n
        return None
    checks.run("reduce_scatter_premul_sum", premul_sum_reduce_scatter)

    def barrier():
        dist.barrier()
        torch.cuda.synchronize()
        return None
    checks.run("barrier", barrier)

    def subgroup():  # torch may create it with ncclCommSplit (eager init with device_id)
        g = dist.new_group(list(range(world)))
        t = pattern(rank, 4096, torch.float32, dev)
        dist.all_reduce(t, group=g)
        if not torch.equal(t, expected_allreduce("sum", world, 4096, torch.float32, dev)):
            return "sub-group all_reduce differs"
        dist.destroy_process_group(g)
        return None
    checks.run("subgroup_all_reduce", subgroup)

    def counted():
        after = dropin_calls()
        # at least one ncclAllReduce per all_reduce call above, so far more than 30
        return None if after is not None and after - before >= 30 else "mcclDropinCalls grew by %s" % (
            None if after is None else after - before)
    checks.run("served_by_minccl", counted)

    failed = sum(checks.results)
    dist.destroy_process_group()
    if rank == 0:
        print("%d passed, %d failed, 0 skipped" % (len(checks.results) - failed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
