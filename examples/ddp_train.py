#!/usr/bin/python3
"""A small model trained with DistributedDataParallel over reccl (or gloo), on CPU tensors.

Everything is deterministic (seeded weights, data made from the rank and the step, one thread per
rank), so two runs with the same arguments give the same per-step losses bit for bit, and a run
that survived a pulled cable can be compared with one that saw no fault.

Launch with any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT:

    torchrun --nproc_per_node 2 examples/ddp_train.py --backend reccl
    reccl testbed run --name tb -- /usr/bin/python3 examples/ddp_train.py --backend reccl --out run1
    sudo reccl inject plan rail0_down.json     # meanwhile: pull host 0's rail-0 cable, plug it back

Rank r prints one line per step ("step 12 loss 2.302...") and, with --out DIR, writes DIR/rank<r>.json:
its losses (as float.hex, exact), each step's end time (CLOCK_REALTIME ns, to line up with a fault
plan's log), step times, and for reccl the communicator's counters (failovers, ...).
Set PYTHONPATH to the build tree's torch/ folder (or install reccl) for the reccl backend.
"""

import argparse
import datetime
import json
import os
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="reccl", choices=["reccl", "gloo"])
    ap.add_argument("--steps", type=int, default=100, help="training steps (default 100)")
    ap.add_argument("--batch", type=int, default=64, help="samples per rank and step (default 64)")
    ap.add_argument("--width", type=int, default=512, help="hidden width of the MLP (default 512)")
    ap.add_argument("--layers", type=int, default=4, help="hidden layers (default 4)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank (default 1; "
                    "results are bit-identical only between runs with the same value)")
    ap.add_argument("--timeout", type=float, default=1800, help="process group timeout in seconds (default 1800, "
                    "torch's)")
    ap.add_argument("--out", help="folder for rank<r>.json")
    ap.add_argument("-q", "--quiet", action="store_true", help="no line per step")
    return ap.parse_args(argv)


def build_model(width, layers, seed):
    import torch
    torch.manual_seed(seed)
    dims = [64] + [width] * layers
    mods = []
    for a, b in zip(dims, dims[1:]):
        mods += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    mods.append(torch.nn.Linear(dims[-1], 10))
    return torch.nn.Sequential(*mods)


def batch(rank, step, size, seed):
    """Inputs and labels for one rank and step: a fixed random teacher labels random points."""
    import torch
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + rank)
    x = torch.randn(size, 64, generator=g)
    teacher = torch.Generator().manual_seed(seed)
    w = torch.randn(64, 10, generator=teacher)
    return x, (x @ w).argmax(dim=1)


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    if args.backend == "reccl":
        import reccl_torch
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)

    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    model = DDP(build_model(args.width, args.layers, args.seed))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()

    losses, ends, times = [], [], []
    for step in range(args.steps):
        t0 = time.perf_counter()
        x, y = batch(rank, step, args.batch, args.seed)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()  # DDP's allreduce of the gradients runs here
        opt.step()
        value = loss.item()
        times.append(time.perf_counter() - t0)
        ends.append(time.time_ns())
        losses.append(value)
        if not args.quiet:
            print(f"step {step} loss {value:.6f}", flush=True)

    result = {"rank": rank, "world": world, "backend": args.backend, "steps": args.steps,
              "losses": [v.hex() for v in losses], "step_end_ns": ends, "step_s": times}
    if args.backend == "reccl":
        result["stats"] = reccl_torch.stats()
        result["fault_source"] = reccl_torch.fault_source()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
