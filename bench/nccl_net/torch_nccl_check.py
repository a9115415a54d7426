#!/usr/bin/env python3
"""NCCL itself over the reccl net plugin, on one GPU: PyTorch's "nccl" backend with two rank
processes that share the GPU and call themselves two hosts (NCCL_HOSTID differs), so NCCL moves
their traffic over its network plugin, NCCL_NET_PLUGIN=reccl, instead of over P2P or shared
memory. Every collective's result is checked element for element; NCCL's own log must say that it
loaded the reccl plugin and that the plugin's device was used.

    python3 bench/nccl_net/torch_nccl_check.py --plugin-dir build/lib --out check.json
    python3 bench/nccl_net/torch_nccl_check.py --backend gloo     # the harness alone, on CPUs

Prints one line per check and a JSON summary (--out). Exit 0: every check passed; 1: one failed;
77: no torch, or no CUDA device for --backend nccl.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time

SIZES = [1024, 1 << 20, 16 << 20]  # float32 elements
TIMED_ITERS = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(args):
    """One rank: every check, printed as 'check NAME ok|WRONG detail', then 'timed ...'."""
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    nccl = args.backend == "nccl"
    dev = torch.device("cuda", 0) if nccl else torch.device("cpu")
    if nccl:
        torch.cuda.set_device(0)
    dist.init_process_group(args.backend, rank=rank, world_size=world)

    def report(name, ok, detail=""):
        print(f"check {name} {'ok' if ok else 'WRONG'} {detail}", flush=True)

    # Whole numbers well inside float32's exact range: every sum is exact whatever the order.
    for n in SIZES:
        x = (torch.arange(n, dtype=torch.float32, device=dev) % 1000) + 1000 * rank
        dist.all_reduce(x)
        want = (torch.arange(n, dtype=torch.float32, device=dev) % 1000) * world + 1000 * sum(range(world))
        report(f"all_reduce_{n}", torch.equal(x, want), f"{n} floats")
    n = SIZES[1]
    mine = torch.full((n,), float(rank + 1), device=dev)
    parts = [torch.empty(n, device=dev) for _ in range(world)]
    dist.all_gather(parts, mine)
    report("all_gather", all(torch.equal(p, torch.full((n,), float(r + 1), device=dev)) for r, p in enumerate(parts)))
    b = torch.arange(n, dtype=torch.float32, device=dev) if rank == 0 else torch.zeros(n, device=dev)
    dist.broadcast(b, src=0)
    report("broadcast", torch.equal(b, torch.arange(n, dtype=torch.float32, device=dev)))
    peer = 1 - rank
    out = torch.full((n,), float(10 + rank), device=dev)
    got = torch.empty(n, device=dev)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, out, peer), dist.P2POp(dist.irecv, got, peer)])
    for r in reqs:
        r.wait()
    report("send_recv", torch.equal(got, torch.full((n,), float(10 + peer), device=dev)))

    # Timed: the largest all_reduce, bus bandwidth as nccl-tests counts it.
    n = SIZES[-1]
    x = torch.ones(n, device=dev)
    dist.all_reduce(x)
    if nccl:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(TIMED_ITERS):
        dist.all_reduce(x)
    if nccl:
        torch.cuda.synchronize()
    sec = (time.perf_counter() - t0) / TIMED_ITERS
    busbw = n * 4 * 2 * (world - 1) / world / sec / 1e9
    print(f"timed all_reduce {n} floats {sec * 1e6:.1f} us busbw {busbw:.3f} GB/s", flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    ap.add_argument("--plugin-dir", default="build/lib", help="folder of libnccl-net-reccl.so")
    ap.add_argument("--lib-path", default="", help="more LD_LIBRARY_PATH entries for the plugin's libraries")
    ap.add_argument("--out", default="", help="write the JSON summary here")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0

    try:
        import torch
    except ImportError:
        print("torch_nccl_check: no torch for " + sys.executable, file=sys.stderr)
        return 77
    if args.backend == "nccl":
        if not torch.cuda.is_available():
            print("torch_nccl_check: no CUDA device", file=sys.stderr)
            return 77
        plugin = os.path.join(args.plugin_dir, "libnccl-net-reccl.so")
        if not os.path.exists(plugin):
            print(f"torch_nccl_check: no {plugin}", file=sys.stderr)
            return 1

    port = free_port()
    libs = ":".join(p for p in [os.path.abspath(args.plugin_dir), args.lib_path, os.environ.get("LD_LIBRARY_PATH", "")] if p)
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   PYTHONUNBUFFERED="1")
        if args.backend == "nccl":
            env.update({
                "LD_LIBRARY_PATH": libs,
                "NCCL_NET_PLUGIN": "reccl",
                # Two "hosts" on one GPU: NCCL then connects the ranks through its network plugin.
                "NCCL_HOSTID": f"reccl-check-host{rank}",
                "NCCL_P2P_DISABLE": "1",
                "NCCL_SHM_DISABLE": "1",
                "NCCL_DEBUG": "INFO",
                "NCCL_DEBUG_SUBSYS": "INIT,NET",
                # The plugin's reccl connections between the two processes over TCP, not shared memory.
                "RECCL_SHM_DISABLE": "1",
            })
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", "--backend", args.backend],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs, codes = [], []
    deadline = time.monotonic() + args.timeout
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += f"\n(rank killed after {args.timeout} s)"
        outputs.append(out)
        codes.append(p.returncode)

    checks = {}
    wrong = []
    for rank, out in enumerate(outputs):
        for m in re.finditer(r"^check (\S+) (ok|WRONG)", out, re.M):
            checks.setdefault(m.group(1), []).append(m.group(2))
            if m.group(2) != "ok":
                wrong.append(f"rank {rank} {m.group(1)}")
    timed = re.search(r"^timed all_reduce (\d+) floats ([0-9.]+) us busbw ([0-9.]+) GB/s", outputs[0], re.M)
    summary = {
        "backend": args.backend,
        "exit_codes": codes,
        "checks": {k: v for k, v in checks.items()},
        "wrong": wrong,
        "all_reduce_16M": {"us": float(timed.group(2)), "busbw_gbs": float(timed.group(3))} if timed else None,
    }
    ok = all(c == 0 for c in codes) and not wrong and len(checks) == len(SIZES) + 3 and \
        all(len(v) == 2 for v in checks.values())
    if args.backend == "nccl":
        log = "\n".join(outputs)
        # NCCL's own words that the plugin was loaded and its device used, and the plugin's.
        summary["plugin_loaded"] = bool(re.search(r"NET/Plugin.*[Ll]oaded.*reccl|Loaded net plugin reccl", log))
        summary["plugin_device"] = bool(re.search(r"NET/reccl: [1-9][0-9]* device\(s\) \(RECCL_NET_DEVICES=", log))
        summary["net_name"] = sorted(set(re.findall(r"Using network (\S+)", log)))
        ok = ok and summary["plugin_loaded"] and summary["plugin_device"] and summary["net_name"] == ["reccl"]
    summary["ok"] = ok
    for rank, out in enumerate(outputs):
        tail = [l for l in out.splitlines() if l.startswith(("check", "timed", "Traceback", "RuntimeError")) or
                "NET/reccl" in l or "NET/Plugin" in l or "Using network" in l or "killed" in l]
        print(f"--- rank {rank} (exit {codes[rank]})")
        print("\n".join(tail[-40:]))
    print(json.dumps(summary))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
