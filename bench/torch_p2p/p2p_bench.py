#!/usr/bin/python3
"""isend/irecv exchange time, reccl backend vs gloo backend, two ranks on this host, one run.

Each timed exchange: both ranks issue isend of SIZE bytes to the other and irecv of as many, in
that order (the order that needs reccl's lanes), and wait for both. Variants, each a fresh pair of
processes, in interleaved rounds with the order rotating per round:
  reccl       reccl's defaults (shared memory between ranks of one host)
  reccl-tcp   RECCL_SHM_DISABLE=1 (TCP over loopback, as gloo)
  reccl-tcp-copy  the same with every step copied through reccl's slots (the direct paths off:
              RECCL_DIRECT_SEND_MIN_BYTES=0, RECCL_DIRECT_RECV_MIN_BYTES=0); not run by default
  gloo        gloo (TCP over loopback)
A run's figure per size is the median exchange time on rank 0 after --warmup; a variant's is the
median over rounds; the ratios are per round (variant / gloo of the same round), median. The
first exchange of a run is reported on its own: for reccl it includes making the two lanes.

    PYTHONPATH=build/torch bench/torch_p2p/p2p_bench.py --rounds 5 --out p2p.json
Exit: 0 done, 1 a run failed, 64 usage, 77 no torch or no reccl_torch.
"""

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile

VARIANTS = {
    "reccl": ("reccl", {}),
    "reccl-tcp": ("reccl", {"RECCL_SHM_DISABLE": "1"}),
    "reccl-tcp-copy": ("reccl", {"RECCL_SHM_DISABLE": "1", "RECCL_DIRECT_SEND_MIN_BYTES": "0",
                                 "RECCL_DIRECT_RECV_MIN_BYTES": "0"}),
    "gloo": ("gloo", {}),
}


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    mult = units.get(text[-1:].upper(), 1)
    value = int(text[:-1] if mult > 1 else text)
    if value <= 0:
        raise ValueError(f"{text}: not a positive size")
    return value * mult


def settle(dist, time):
    """Waits until reccl's link detectors (the group's and its lanes') have loaded, as reccl-bench
    does before it times: their BPF verification takes CPU in the background for a while."""
    if dist.get_backend() != "reccl":
        return
    import reccl_torch
    deadline = time.monotonic() + 30
    while reccl_torch.stats()["faultSourceStarting"] and time.monotonic() < deadline:
        time.sleep(0.05)
    dist.barrier()


def _rank(rank, store_url, backend, env, sizes, iters, warmup, results):
    os.environ.update(env)
    try:
        import time
        import torch
        import torch.distributed as dist
        import reccl_torch  # noqa: F401
        dist.init_process_group(backend, init_method=store_url, rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=120))
        peer = 1 - rank
        out = {"first_us": None, "median_us": {}}
        for size in sizes:
            x = torch.full((size,), rank + 1, dtype=torch.uint8)
            y = torch.empty(size, dtype=torch.uint8)
            times = []
            for i in range(warmup + iters):
                dist.barrier()
                t0 = time.perf_counter()
                reqs = [dist.isend(x, peer), dist.irecv(y, peer)]
                for r in reqs:
                    r.wait()
                dt = (time.perf_counter() - t0) * 1e6
                if out["first_us"] is None:
                    out["first_us"] = dt
                    settle(dist, time)
                if i >= warmup:
                    times.append(dt)
            if not bool((y == peer + 1).all()):
                raise RuntimeError(f"{size} B: the received bytes are wrong")
            out["median_us"][size] = statistics.median(times)
        dist.destroy_process_group()
        results.put((rank, True, out))
    except BaseException as e:  # to the parent, with the rank
        results.put((rank, False, repr(e)))
        raise SystemExit(1)


def run_pair(backend, env, sizes, iters, warmup):
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="reccl-p2p-bench-") as tmp:
        results = ctx.Queue()
        url = "file://" + os.path.join(tmp, "store")
        procs = [ctx.Process(target=_rank, args=(r, url, backend, env, sizes, iters, warmup, results), daemon=True)
                 for r in range(2)]
        for p in procs:
            p.start()
        got = {}
        try:
            for _ in procs:
                rank, ok, value = results.get(timeout=600)
                if not ok:
                    raise RuntimeError(f"rank {rank}: {value}")
                got[rank] = value
        finally:
            for p in procs:
                p.join(5)
                if p.is_alive():
                    p.kill()
        return got[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4K,64K,1M,8M,32M", help="comma list of message sizes (K/M/G suffixes)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20, help="timed exchanges per size and run")
    ap.add_argument("--warmup", type=int, default=3, help="untimed exchanges before them")
    ap.add_argument("--variants", default="reccl,reccl-tcp,gloo", help="comma list of " + ", ".join(VARIANTS))
    ap.add_argument("--out", help="JSON file for every run's figures")
    args = ap.parse_args()
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    except ValueError as e:
        print(f"p2p_bench: --sizes: {e}", file=sys.stderr)
        return 64
    variants = args.variants.split(",")
    if any(v not in VARIANTS for v in variants) or "gloo" not in variants:
        print(f"p2p_bench: --variants: names from {', '.join(VARIANTS)}, gloo included", file=sys.stderr)
        return 64
    if args.rounds < 1 or args.iters < 1 or args.warmup < 0:
        print("p2p_bench: --rounds >= 1, --iters >= 1, --warmup >= 0", file=sys.stderr)
        return 64
    try:
        import torch  # noqa: F401
        import reccl_torch  # noqa: F401
    except ImportError as e:
        print(f"p2p_bench: {e} (run with /usr/bin/python3 and PYTHONPATH=<build>/torch)", file=sys.stderr)
        return 77

    report = {"command": " ".join(sys.argv), "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "host": platform.node(), "cpus": os.cpu_count(), "load_before": loadavg(), "runs": []}
    for rnd in range(args.rounds):
        order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
        for v in order:
            backend, env = VARIANTS[v]
            try:
                r = run_pair(backend, env, sizes, args.iters, args.warmup)
            except (RuntimeError, OSError, EOFError) as e:
                print(f"p2p_bench: round {rnd} {v} failed: {e}", file=sys.stderr)
                return 1
            report["runs"].append({"round": rnd, "variant": v, **r})
            print(f"round {rnd} {v:10s} first {r['first_us'] / 1000:7.1f} ms  " +
                  " ".join(f"{s}:{r['median_us'][s]:.0f}us" for s in sizes), file=sys.stderr, flush=True)
    report["load_after"] = loadavg()

    def runs(v):
        return [r for r in report["runs"] if r["variant"] == v]
    gloo = {r["round"]: r for r in runs("gloo")}
    print(f"\nisend+irecv exchange, 2 ranks on one host, {args.rounds} rounds x {args.iters} exchanges, "
          f"load {report['load_before']} -> {report['load_after']}")
    print("| size | " + " | ".join(f"{v} median (us)" for v in variants) + " | " +
          " | ".join(f"{v} / gloo (min-max)" for v in variants if v != "gloo") + " |")
    print("|---" * (1 + len(variants) + len(variants) - 1) + "|")
    summary = {}
    for s in sizes:
        cells, ratios = [], []
        for v in variants:
            cells.append(f"{statistics.median(r['median_us'][s] for r in runs(v)):.0f}")
            if v != "gloo":
                rs = [r["median_us"][s] / gloo[r["round"]]["median_us"][s] for r in runs(v)]
                summary.setdefault(v, {})[s] = statistics.median(rs)
                ratios.append(f"{statistics.median(rs):.2f} ({min(rs):.2f}-{max(rs):.2f})")
        print(f"| {s} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    firsts = " ".join(f"{v} {statistics.median(r['first_us'] for r in runs(v)) / 1000:.1f} ms" for v in variants)
    print(f"first exchange (median over rounds; reccl's makes its two lanes): {firsts}")
    report["summary"] = summary
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
