"""One rank of a point-to-point exchange over the reccl (or gloo) backend, for the fault test.

Each round both ranks issue `isend` of their tensor to the other first, then `irecv` of the
other's (the order that needs reccl's lanes), wait for both, and check every received element
against what the peer sends in that round. Writes <out>/rank<r>.json: rounds, wrong rounds,
each round's end (realtime ns) and time, the backend's counters. Prints "step N" per round.
With --stop-file the ranks go on until that file exists (agreed by an allreduce each round), so a
test can end the run once its fault is over, whatever the pace.

    reccl testbed run --name tb -- python3 p2p_exchange_worker.py --out DIR --rounds 400
"""

import argparse
import datetime
import json
import os
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=400, help="rounds; with --stop-file, the most")
    ap.add_argument("--stop-file", help="end after the round in which this file exists on any rank")
    ap.add_argument("--elements", type=int, default=1 << 20, help="int32 elements per message (4 MiB)")
    ap.add_argument("--backend", default="reccl")
    ap.add_argument("--timeout", type=float, default=60.0, help="process group timeout, seconds")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args()
    import torch
    import torch.distributed as dist
    if args.backend == "reccl":
        import reccl_torch
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    peer = 1 - rank
    base = torch.arange(args.elements, dtype=torch.int32)
    got = torch.empty(args.elements, dtype=torch.int32)
    wrong, ends, times = [], [], []
    stop = torch.zeros(1, dtype=torch.int32)
    for r in range(args.rounds):
        t0 = time.perf_counter()
        mine = base * 3 + (r * 7 + rank * 1_000_003)
        reqs = [dist.isend(mine, peer), dist.irecv(got, peer)]
        for q in reqs:
            q.wait()
        if not torch.equal(got, base * 3 + (r * 7 + peer * 1_000_003)):
            wrong.append(r)
        times.append(time.perf_counter() - t0)
        ends.append(time.time_ns())
        if not args.quiet:
            print(f"step {r} done", flush=True)
        if args.stop_file:
            stop.fill_(1 if os.path.exists(args.stop_file) else 0)
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)
            if stop.item():
                break
    result = {"rank": rank, "world": world, "rounds": len(ends), "wrong": wrong, "round_end_ns": ends,
              "round_s": times}
    if args.backend == "reccl":
        result["stats"] = reccl_torch.stats()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
