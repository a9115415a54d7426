#!/usr/bin/env python3
"""The steps of bench/sim/validate.sh that read and write JSON.

  validate.py plan OUT.json --netns NS --faults N --seed S [--alternate]
      a fault plan for `reccl-bench --fault-plan`: N link-downs of NS's rail at the switch side,
      seeded random durations (0.3-1.2 s) and gaps after each recovery (0.2-1.5 s), first at 3 s;
      --alternate takes turns between rail0 and rail1 (a source that never fails back).
  validate.py inputs RUN.json DIR --policy NAME [--holddown-ms MS --half-life-ms MS]
      from a reccl-bench --fault-plan --json run: DIR/trace.json (its faults, as reccl-sim reads
      them), DIR/scenario.json (2 hosts x 2 NICs, the loop as the job) and DIR/measured.json.
  validate.py compare DIR/measured.json SIM.json --policy NAME --tolerance PCT
      prints measured and simulated loop times; exit 1 when they differ by more than PCT %.
"""
import argparse
import json
import random
import re
import statistics
import sys


def plan(a):
    rng = random.Random(a.seed)
    acts, t = [], 3000
    for i in range(a.faults):
        down = rng.randint(300, 1200)
        rail = i % 2 if a.alternate else 0
        acts.append({"at_ms": t, "action": "link-down", "duration_ms": down,
                     "target": {"netns": a.netns, "dev": "rail%d" % rail, "side": "switch"}})
        t += down + rng.randint(200, 1500)
    json.dump({"version": 1, "actions": acts}, open(a.out, "w"), indent=1)


def inputs(a):
    run = json.load(open(a.run))
    if run.get("status") != "ok":
        sys.exit("validate.py: %s: the fault run failed (%s)" % (a.run, run.get("error", "status not ok")))
    its = run["iterations"]
    t0 = run["t0_mono_ns"]
    start0 = its[0]["start_mono_ns"]
    shift = (start0 - t0) / 1e9  # fault times in the bench are from t0; the loop starts here
    faults = run["faults"]
    if not faults:
        sys.exit("validate.py: %s: no faults" % a.run)
    # The loop's fault-free speed: the mean period of the iterations that no fault touched (none
    # overlaps a fault's stall or a fail-back, with 0.2 s to spare), taken over the whole run, so
    # that the machine's own swings (others' builds) weigh alike in the estimate and the loop.
    busy = []
    for f in faults:
        at = f["at_s"] - shift
        busy.append((at, at + (f["stall_ms"] or 0) / 1e3 + 0.2))
        if f.get("recover_at_s") is not None:
            rec = f["recover_at_s"] - shift
            back = f["failed_back_at_s"] - shift if f.get("failed_back_at_s") is not None else rec + a.holddown_ms / 1e3
            busy.append((rec, back + 0.2))
    clean = []
    for i in range(len(its) - 1):
        b, e = (its[i]["start_mono_ns"] - start0) / 1e9, (its[i + 1]["start_mono_ns"] - start0) / 1e9
        if not any(b < hi and e > lo for lo, hi in busy):
            clean.append(i)
    if len(clean) < 20:
        sys.exit("validate.py: only %d iterations untouched by a fault" % len(clean))
    period = statistics.mean((its[i + 1]["start_mono_ns"] - its[i]["start_mono_ns"]) / 1e9 for i in clean)
    call = statistics.mean((its[i]["end_mono_ns"] - its[i]["start_mono_ns"]) / 1e9 for i in clean)
    n = len(its)
    work = (n - 1) * period + call
    measured = (its[-1]["end_mono_ns"] - start0) / 1e9
    trace = []
    for f in faults:
        m = re.search(r"rail(\d+)", f["target"])
        if f.get("recover_at_s") is None or not m:
            sys.exit("validate.py: fault %d has no recovery or no rail (%s)" % (f["index"], f["target"]))
        trace.append({"kind": "down", "at_s": f["at_s"] - shift, "host": 0, "nic": int(m.group(1)),
                      "duration_s": f["recover_at_s"] - f["at_s"]})
    json.dump({"version": 1, "faults": trace}, open(a.dir + "/trace.json", "w"), indent=1)
    policy = {"holddown_s": a.holddown_ms / 1e3, "damping": {"half_life_s": a.half_life_ms / 1e3}}
    scenario = {"version": 1,
                "cluster": {"gpus": 2, "gpus_per_host": 1, "nics_per_host": 2},
                "job": {"work_s": work, "comm_share": min(1.0, call / period),
                        "checkpoint_interval_s": 1e9, "checkpoint_cost_s": 0, "restart_s": 0},
                "faults": {"link_faults_per_link_day": 0, "flaps_per_link_day": 0, "gray_per_link_day": 0,
                           "other_failures_per_gpu_day": 0},
                "policies": {a.policy: policy}}
    json.dump(scenario, open(a.dir + "/scenario.json", "w"), indent=1)
    s = run["summary"]
    json.dump({"run": a.run, "policy": a.policy, "iterations": n, "clean_iterations": len(clean), "faults": len(faults),
               "faults_with_failover": s["faults_with_failover"],
               "iteration_period_s": period, "call_s": call, "comm_share": scenario["job"]["comm_share"],
               "fault_free_loop_s": work, "measured_loop_s": measured,
               "stall_ms": s["stall_ms"], "degraded_over_before": s["ratios"]["degraded_over_before"],
               "counters": run["counters"]},
              open(a.dir + "/measured.json", "w"), indent=1)


def compare(a):
    m = json.load(open(a.measured))
    sim = json.load(open(a.sim))
    p = next(x for x in sim["policies"] if x["name"] == a.policy)
    simulated = p["wall_s"]["mean"]
    ci = p["wall_s"]["ci95"]
    ff, meas = m["fault_free_loop_s"], m["measured_loop_s"]
    err = (simulated - meas) / meas * 100
    extra_m, extra_s = meas - ff, simulated - ff
    out = {"policy": a.policy, "faults": m["faults"], "faults_with_failover": m["faults_with_failover"],
           "iterations": m["iterations"], "fault_free_loop_s": ff, "measured_loop_s": meas,
           "simulated_loop_s": simulated, "simulated_ci95_s": ci, "error_pct": err,
           "measured_fault_cost_s": extra_m, "simulated_fault_cost_s": extra_s,
           "simulated_failovers": p["means"]["failovers"], "simulated_failbacks": p["means"]["failbacks"],
           "tolerance_pct": a.tolerance, "within": abs(err) <= a.tolerance}
    print("%-18s faults %3d, failed over: measured %3d simulated %5.1f; loop measured %8.3f s simulated %8.3f s"
          " (± %s) error %+6.2f %% | fault-free %8.3f s; cost of the faults measured %7.3f s simulated %7.3f s"
          % (a.policy, m["faults"], m["faults_with_failover"], p["means"]["failovers"], meas, simulated,
             "%.3f" % ci if ci is not None else "-", err, ff, extra_m, extra_s))
    if a.out:
        json.dump(out, open(a.out, "w"), indent=1)
    sys.exit(0 if out["within"] else 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan")
    p.add_argument("out")
    p.add_argument("--netns", required=True)
    p.add_argument("--faults", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--alternate", action="store_true")
    p = sub.add_parser("inputs")
    p.add_argument("run")
    p.add_argument("dir")
    p.add_argument("--policy", required=True)
    p.add_argument("--holddown-ms", type=float, default=300)
    p.add_argument("--half-life-ms", type=float, default=200)
    p = sub.add_parser("compare")
    p.add_argument("measured")
    p.add_argument("sim")
    p.add_argument("--policy", required=True)
    p.add_argument("--tolerance", type=float, default=15)
    p.add_argument("--out")
    a = ap.parse_args()
    {"plan": plan, "inputs": inputs, "compare": compare}[a.cmd](a)


if __name__ == "__main__":
    main()
