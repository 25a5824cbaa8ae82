#!/usr/bin/env python3
"""PyTorch's all_reduce timed as a training job calls it, on whichever libnccl.so.2 serves the process.

Run once with minccl's drop-in preloaded and once without (torch's own NCCL), on the same GPUs:

    LD_PRELOAD=$PWD/build/cuda/lib/libnccl.so.2 NCCL_NVLS_ENABLE=0 \\
        torchrun --nproc_per_node 2 final/tests/torch_allreduce_bench.py > minccl.txt
    NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node 2 final/tests/torch_allreduce_bench.py > nccl.txt

Tensors come from PyTorch's caching allocator (torch.empty on the device), as a model's gradients do, at
64 KiB to 256 MiB (MCCL_TORCH_BENCH_MAX_LOG2, default 28, caps the bytes at 2^N), in float32 and bfloat16,
each whole and as an odd view: a slice t[1:] of a tensor one element longer, so its address is one element
past the allocator's alignment, as views into a flattened bucket are. Each case runs a few calls to warm up,
then `iters` back-to-back eager calls between two CUDA events (enough calls for about 1 GiB, 20 to 1000), three
times; rank 0 prints one line per case with the median time per call:

    allreduce DTYPE BYTES VIEW US

and a first line naming the library that served the calls (minccl when it exports mcclDropinCalls). The
results are checked after timing (every rank's input is its rank + 1, so each element must be the sum).
"""
import ctypes
import os
import sys

import torch
import torch.distributed as dist


def library():
    try:
        ctypes.CDLL(None).mcclDropinCalls
        return "minccl"
    except AttributeError:
        return "nccl-%s" % ".".join(str(v) for v in torch.cuda.nccl.version())


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    max_log2 = int(os.environ.get("MCCL_TORCH_BENCH_MAX_LOG2", "28"))
    dist.init_process_group("nccl", device_id=dev)
    if rank == 0:
        print("# library %s, %d ranks, %s" % (library(), world, torch.cuda.get_device_name(dev)), flush=True)
    wrong = 0
    for dtype in (torch.float32, torch.bfloat16):
        esize = torch.tensor([], dtype=dtype).element_size()
        for log2 in range(16, max_log2 + 1, 2):
            nbytes = 1 << log2
            n = nbytes // esize
            for view in ("aligned", "odd"):
                base = torch.empty(n + (view == "odd"), dtype=dtype, device=dev)
                t = base[1:] if view == "odd" else base
                iters = max(20, min(1000, (1 << 30) // nbytes))
                times = []
                for _ in range(3):
                    t.fill_(rank + 1)
                    for _ in range(3):
                        dist.all_reduce(t)
                    dist.barrier()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(iters):
                        dist.all_reduce(t)
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end) * 1e3 / iters)
                # One more call on known input: every element is the sum of the ranks' rank + 1.
                t.fill_(rank + 1)
                dist.all_reduce(t)
                want = world * (world + 1) // 2
                bad = int((t != want).sum().item())
                wrong += bad
                if rank == 0:
                    print("allreduce %s %d %s %.2f%s" % (str(dtype).replace("torch.", ""), nbytes, view,
                                                        sorted(times)[1], "" if bad == 0 else " WRONG %d" % bad),
                          flush=True)
                del base, t
    total = torch.tensor([wrong], device=dev)
    dist.all_reduce(total)
    dist.destroy_process_group()
    if rank == 0 and total.item() != 0:
        print("# %d wrong elements" % total.item(), flush=True)
    return 1 if total.item() != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
