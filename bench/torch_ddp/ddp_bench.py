#!/usr/bin/python3
"""DDP step time, reccl backend vs gloo backend, on one fresh 2-host testbed in one run.

Runs examples/ddp_train.py (one rank per host) in interleaved rounds, the order of the variants
rotating per round:
  reccl        all rails (RECCL_NICS unset: one channel per rail)
  reccl-rail0  RECCL_NICS==rail0 (one NIC, as gloo)
  gloo         GLOO_SOCKET_IFNAME=rail0
A run's figure is the median time of its steps after --warmup; a variant's is the median over
rounds, with the min and max; the ratios are per round (variant / gloo of the same round), median.

    sudo PYTHONPATH=build/torch bench/torch_ddp/ddp_bench.py --reccl build/bin/reccl \\
        --rounds 7 --steps 40 --width 512 --layers 4 --out ddp_bench.json
    ... --chrt 10     # ranks under SCHED_FIFO 10, ahead of other work on a shared machine
Exit: 0 done, 1 a run failed, 64 usage, 77 not root / no torch.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_testbed import PYTHON, Testbed, read_ranks, require_root_and_torch  # noqa: E402

VARIANTS = {
    "reccl": ("reccl", {}),
    "reccl-rail0": ("reccl", {"RECCL_NICS": "=rail0"}),
    "gloo": ("gloo", {"GLOO_SOCKET_IFNAME": "rail0"}),
}


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reccl", required=True, help="the reccl CLI (build/bin/reccl)")
    ap.add_argument("--example", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                      "examples", "ddp_train.py"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of each run's median")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma list of " + ", ".join(VARIANTS))
    ap.add_argument("--chrt", type=int, help="run the ranks under SCHED_FIFO at this priority (1-99)")
    ap.add_argument("--out", help="JSON file for every run's figures")
    args = ap.parse_args()
    variants = args.variants.split(",")
    if any(v not in VARIANTS for v in variants) or "gloo" not in variants:
        print(f"ddp_bench: --variants: names from {', '.join(VARIANTS)}, gloo included", file=sys.stderr)
        return 64
    if args.chrt is not None and not 1 <= args.chrt <= 99:
        print(f"ddp_bench: --chrt: a priority 1-99, got {args.chrt}", file=sys.stderr)
        return 64
    if args.rounds < 1 or args.steps <= args.warmup:
        print("ddp_bench: --rounds >= 1 and --steps > --warmup", file=sys.stderr)
        return 64
    require_root_and_torch(args.reccl)

    model = ["--width", str(args.width), "--layers", str(args.layers), "--batch", str(args.batch)]
    params = 64 * args.width + args.width + (args.layers - 1) * (args.width * args.width + args.width) + \
        args.width * 10 + 10
    report = {"command": " ".join(sys.argv), "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "host": platform.node(), "cpus": os.cpu_count(), "load_before": loadavg(),
              "chrt": args.chrt, "model_params": params, "steps": args.steps, "warmup": args.warmup, "runs": []}
    with tempfile.TemporaryDirectory(prefix="reccl-ddp-bench-") as work, \
            Testbed(args.reccl, hosts=2, rails=2, pythonpath=os.environ.get("PYTHONPATH")) as tb:
        for rnd in range(args.rounds):
            order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
            for v in order:
                backend, env = VARIANTS[v]
                out = os.path.join(work, f"{v}-{rnd}")
                argv = [PYTHON, args.example, "--out", out, "--backend", backend, "--steps", str(args.steps), "-q"]
                if args.chrt:
                    argv = ["chrt", "-f", str(args.chrt)] + argv
                run = tb.start_ranks(argv + model, env=env)
                if run.wait(900) != 0:
                    sys.stderr.write(run.output()[-4000:])
                    print(f"ddp_bench: round {rnd} {v} failed", file=sys.stderr)
                    return 1
                ranks = read_ranks(out, 2)
                # A step ends when both ranks have it: the slower rank's time per step.
                per_step = [max(a, b) for a, b in zip(ranks[0]["step_s"], ranks[1]["step_s"])][args.warmup:]
                med = statistics.median(per_step)
                report["runs"].append({"round": rnd, "variant": v, "median_step_ms": med * 1000,
                                       "failovers": sum(r.get("stats", {}).get("failovers", 0) for r in ranks)})
                print(f"round {rnd} {v:12s} median step {med * 1000:8.2f} ms", file=sys.stderr, flush=True)
    report["load_after"] = loadavg()

    def runs(v):
        return [r for r in report["runs"] if r["variant"] == v]
    summary = {}
    for v in variants:
        ms = [r["median_step_ms"] for r in runs(v)]
        gloo_by_round = {r["round"]: r["median_step_ms"] for r in runs("gloo")}
        ratios = [r["median_step_ms"] / gloo_by_round[r["round"]] for r in runs(v)]
        summary[v] = {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms),
                      "ratio_to_gloo_median": statistics.median(ratios), "ratio_min": min(ratios),
                      "ratio_max": max(ratios)}
    report["summary"] = summary
    print(f"\nDDP step time, {params} parameters ({params * 4 / 1e6:.1f} MB of gradients), {args.rounds} rounds x "
          f"{args.steps - args.warmup} timed steps{', SCHED_FIFO ' + str(args.chrt) if args.chrt else ''}, "
          f"load {report['load_before']} -> {report['load_after']}")
    print("| variant | median step (ms) | min-max (ms) | / gloo, median of rounds (min-max) |")
    print("|---|---|---|---|")
    for v, s in summary.items():
        print(f"| {v} | {s['median_ms']:.1f} | {s['min_ms']:.1f}-{s['max_ms']:.1f} | "
              f"{s['ratio_to_gloo_median']:.2f} ({s['ratio_min']:.2f}-{s['ratio_max']:.2f}) |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
