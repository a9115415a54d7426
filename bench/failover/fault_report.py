#!/usr/bin/env python3
"""The report of bench/failover/fault_bench.sh: reads the work directory it filled, writes one JSON
file with every run and prints the table.

    fault_report.py WORK OUT

WORK holds meta.json (the script's settings), base_one.json and base_two.json (plain reccl-bench,
one rail and both rails), base_loop_one_r0..rK.json (one rail, fault-free, in the fault loop's own
mode: one before each round and one after the last), fault_<source>_r<k>.json (round k's share of
the faults for that source, `reccl-bench --fault-plan`), and the Gloo runs.

Rounds: the one-rail baseline is measured between the fault runs, so that "degraded after a
failover / one rail fault-free" compares figures taken minutes apart at most, not a baseline taken
once at the start of a run that lasts longer than the machine stays the same. Each round's
degraded figure is paired with the mean of the two one-rail baselines around it; the median over
rounds of these paired ratios is the figure the goal is judged on.

Exit 0 when every run completed with exact results, 1 otherwise (the JSON is written either way).
"""
import json
import math
import os
import re
import statistics
import sys
import time


def nearest_rank(values, p):
    """Nearest-rank percentile, as reccl-bench's (fault_timeline.cpp)."""
    v = sorted(values)
    if not v:
        return None
    rank = max(1, math.ceil(p * len(v)))
    return v[min(rank, len(v)) - 1]


def spread(values):
    v = [x for x in values if x is not None]
    return {"n": len(v), "p50": nearest_rank(v, 0.5), "p99": nearest_rank(v, 0.99), "max": nearest_rank(v, 1.0)}


def median(values):
    v = [x for x in values if x is not None]
    return nearest_rank(v, 0.5) if v else None


def load(work, tag):
    p = os.path.join(work, tag + ".json")
    return json.load(open(p)) if os.path.exists(p) else None


def log_tail(work, tag, n=3):
    p = os.path.join(work, tag + ".log")
    if not os.path.exists(p):
        return ""
    return "".join(open(p, errors="replace").readlines()[-n:])


# The initiator's failover line (ccl/failover/migration/migration_log.cpp): its timeline in us between
# stamps, and with the in-process detector the queue hop's split.
TIMELINE = re.compile(
    r"failover of .* fault-to-switch (\d+) us.* timeline us: queue -?\d+ thread (-?\d+) (?:standby|connect) (-?\d+)"
    r" request (-?\d+) reply (-?\d+) commit (-?\d+)(?: \(queue: detector (-?\d+) monitor wake (-?\d+) monitor (-?\d+)\))?"
    r"(, on the monitor thread)?")
# A move the monitor made itself (a standby's request sent, the reply read and committed there)
# has no thread hop (-1).
HOPS = ("detector", "monitor_wake", "monitor", "thread", "path", "request", "reply", "commit", "signal_to_commit")


def hop_split(work, tags):
    """Where signal -> committed goes: every move away from a fault this run's ranks initiated (the
    failover lines of the fault runs' logs; fail-backs and the passive ends left out), per hop of
    the timeline, us. A hop a line does not have (no in-process detector; a stamp not reached) is
    left out of that hop's figures."""
    per = {h: [] for h in HOPS}
    n = early = 0
    for tag in tags:
        path = os.path.join(work, tag + ".log")
        if not os.path.exists(path):
            continue
        for line in open(path, errors="replace"):
            m = TIMELINE.search(line)
            if not m:
                continue
            n += 1
            total, thread, path_us, request, reply, commit, det, wake, mon, on_monitor = m.groups()
            early += 1 if on_monitor else 0
            for h, v in zip(HOPS, (det, wake, mon, thread, path_us, request, reply, commit, total)):
                if v is not None and int(v) >= 0:
                    per[h].append(int(v))
    if n == 0:
        return None
    out = {"connections": n, "on_monitor_thread": early}
    for h, v in per.items():
        if v:
            out[h] = dict(spread(v), p90=nearest_rank(v, 0.9))
    return out


def oop(run):
    return run["rows"][0]["out_of_place"]["busbw_gbps"]


def loop_busbw(run):
    """Median busbw of a fault-loop run's iterations; None without any."""
    if run is None or not run.get("iterations"):
        return None
    return median([i["busbw_gbps"] for i in run["iterations"]])


def window_medians(faults):
    """Bandwidth before / during / degraded / after over these faults: the median over the faults of
    each fault's figure (reccl-bench's per-fault window median; for "during", the slowest call of
    the fault). Every fault weighs the same, however many calls its window held (reccl-bench's own
    summary is the median over all calls instead)."""
    return {k: median(f["busbw_%s_gbps" % k] for f in faults) for k in ("before", "during", "degraded", "after")}


def call_ms(seg, busbw):
    """The time of one call of this run at this bus bandwidth (reccl-bench: busbw = bytes x
    busbw_factor / time)."""
    c = seg.get("collective") or {}
    if not busbw or "bytes" not in c:
        return None
    return c["bytes"] * c.get("busbw_factor", 1.0) / (busbw * 1e9) * 1e3


def missed_faults(segments):
    """Faults no failover followed (a short drop may pass without one: TCP resent what was lost).
    What each cost: the call it hit over the median call before it, in ms. Those that hit a rail
    no connection was on (an earlier fault's fail-back still pending) are counted apart."""
    extra = []
    pending = 0
    for seg in segments:
        for f in seg.get("faults") or []:
            if f.get("stall_ms") is not None:
                continue
            if f.get("fail_back_pending"):
                pending += 1
            hit, before = call_ms(seg, f.get("busbw_during_gbps")), call_ms(seg, f.get("busbw_before_gbps"))
            extra.append(hit - before if hit is not None and before is not None else None)
    return {"faults": len(extra), "fail_back_pending": pending, "hit_call_extra_ms": spread(extra)}


def pool_source(segments):
    """One source's rounds as one: per-fault figures pooled over every round's faults.

    Stall and its parts: percentiles over all faults; bandwidth: window_medians over all faults."""
    faults = [f for seg in segments for f in seg.get("faults") or []]
    sums = [seg["summary"] for seg in segments]
    out = {
        "faults": sum(s["faults"] for s in sums),
        "faults_with_failover": sum(s["faults_with_failover"] for s in sums),
        "missed": missed_faults(segments),
        "wrong_elements": sum(seg["out_of_bounds"] for seg in segments),
        "stall_ms": spread(f["stall_ms"] for f in faults),
        "stall_ms_fault_inside_a_call": spread(f["stall_ms"] for f in faults if f.get("in_collective")),
        # A fault between calls finds the application's own work between them on the CPUs (the
        # bench: both ranks comparing the result) rather than threads waiting on the network.
        "stall_ms_fault_between_calls": spread(f["stall_ms"] for f in faults if f.get("in_collective") is False),
        "signal_after_fault_ms": spread(f["signal_after_fault_ms"] for f in faults),
        "fault_to_switch_ms": spread(f["fault_to_switch_ms"] for f in faults),
        "first_step_ms": spread(f.get("first_step_ms") for f in faults),
        "resume_after_switch_ms": spread(f.get("resume_after_switch_ms") for f in faults),
        "busbw_gbps": window_medians(faults),
        "counters": {k: sum(seg["counters"][k] for seg in segments)
                     for k in ("failovers", "failbacks", "bytes_resent", "duplicate_steps")},
        "status": "ok" if all(seg["status"] == "ok" for seg in segments) else "failed",
    }
    out["counters"]["summed_over_ranks"] = all(seg["counters"]["summed_over_ranks"] for seg in segments)
    return out


def paired_rounds(segments, loops):
    """Per round: its degraded busbw (window_medians over its faults) over the mean of the one-rail
    loop runs before and after it; no ratio when either run has no figure (the report counts that
    run as failed)."""
    rows = []
    for k, seg in enumerate(segments):
        g = window_medians(seg.get("faults") or [])["degraded"]
        one = (loops[k] + loops[k + 1]) / 2 if loops[k] is not None and loops[k + 1] is not None else None
        rows.append({"round": k, "faults": seg["summary"]["faults"], "degraded_gbps": g, "one_rail_fault_loop_gbps": one,
                     "ratio": g / one if g is not None and one else None})
    return rows


def fold(name):
    """kdamond.0 -> kdamond, ksoftirqd/1 -> ksoftirqd, kworker/0:1-mm -> kworker."""
    return re.split(r"[/.]", name)[0]


def waits_report(path):
    """runqslower -P lines: the reccl threads' waits for a CPU, and per task name (numbered kernel
    threads folded: kdamond.0, ksoftirqd/1) how often the CPU came from it."""
    lat, prev = [], {}
    # runqslower -P prints "%-8s %-16s %-6d %14llu %-16s %-6d": time, task, tid, wait (us), the
    # task the CPU came from, its tid; a task name may hold spaces, hence the fixed width.
    row = re.compile(r"^\d\d:\d\d:\d\d (.{16}) +\d+ +(\d+) (.*?) +\d+\s*$")
    for line in open(path, errors="replace"):
        m = row.match(line)
        if not m or not m.group(1).strip().startswith("reccl"):
            continue
        lat.append(int(m.group(2)))
        holder = m.group(3).strip()
        name = holder if holder.startswith("reccl") else fold(holder)
        prev[name] = prev.get(name, 0) + 1
    top = dict(sorted(prev.items(), key=lambda kv: -kv[1])[:8])
    return {"reccl_waits": len(lat), "max_us": max(lat) if lat else 0,
            "p99_us": nearest_rank(lat, 0.99) if lat else 0, "cpu_from": top}


GOAL_STALL_MS = 5.0  # the goal: stall p99 within 5 ms with BPF detection (docs/benchmarks.md)


def read_bursts(path):
    """kthread_bursts.bt lines, per fault run ("# TAG" header before each): {tag: [(start_ns,
    end_ns, kernel thread name)]}."""
    runs, cur = {}, None
    for line in open(path, errors="replace"):
        if line.startswith("# "):
            cur = runs.setdefault(line[2:].strip(), [])
            continue
        p = line.split(None, 4)
        if cur is None or len(p) < 5 or p[0] != "burst":
            continue
        cur.append((int(p[2]), int(p[3]), p[4].strip()))
    return runs


def lay_bursts(segments, tags, bursts):
    """Marks each fault with the longest kernel-thread burst (kthread_bursts.bt) that overlapped its
    stall [fault, fault + stall] and sums up per source: how many faults over the goal had one, how
    many within it had one, and the stall without the faults that had one."""
    over, within, clean, by, held = 0, 0, [], {}, []
    over_with, within_with, untraced = 0, 0, 0
    for seg, tag in zip(segments, tags):
        t0 = seg.get("t0_mono_ns")
        for f in seg.get("faults") or []:
            if f.get("stall_ms") is None or t0 is None or f.get("at_s") is None:
                continue
            if tag not in bursts:  # no trace of this run (its tracer never started): unknown, not "none"
                untraced += 1
                continue
            lo = t0 + int(round(f["at_s"] * 1e9))
            hi = lo + int(round(f["stall_ms"] * 1e6))
            inside = [(s, e, name) for s, e, name in bursts[tag] if s < hi and e > lo]
            hit = [(e - s, name) for s, e, name in inside]
            longest = max(hit) if hit else None
            f["kthread_burst_ms"] = longest[0] / 1e6 if longest else 0.0
            f["kthread_burst_thread"] = longest[1] if longest else None
            # The CPU time those bursts took inside the stall, summed over the CPUs (so it may
            # exceed the stall itself on a machine with more than one).
            f["kthread_cpu_in_stall_ms"] = sum(min(e, hi) - max(s, lo) for s, e, _ in inside) / 1e6
            if f["stall_ms"] > GOAL_STALL_MS and hit:
                held.append(f["kthread_cpu_in_stall_ms"] / f["stall_ms"])
            if f["stall_ms"] > GOAL_STALL_MS:
                over += 1
                if hit:
                    over_with += 1
                    by[fold(longest[1])] = by.get(fold(longest[1]), 0) + 1
            else:
                within += 1
                within_with += 1 if hit else 0
            if not hit:
                clean.append(f["stall_ms"])
    return {"faults_over_goal": over, "over_goal_with_a_burst": over_with, "faults_within_goal": within,
            "within_goal_with_a_burst": within_with, "over_goal_by_thread": by,
            # Over the goal and with a burst: the kernel threads' CPU time inside the stall (summed
            # over the CPUs) over the stall.
            "over_goal_kthread_cpu_share_p50": median(held), "faults_untraced": untraced,
            "stall_ms_faults_without_a_burst": spread(clean)}


def bursts_summary(bursts):
    """Every burst traced during the fault runs: count, longest, per kernel thread (folded)."""
    every = [(e - s, name) for runs in bursts.values() for s, e, name in runs]
    per = {}
    for d, name in every:
        n, tot, mx = per.get(fold(name), (0, 0, 0))
        per[fold(name)] = (n + 1, tot + d, max(mx, d))
    top = sorted(per.items(), key=lambda kv: -kv[1][1])[:8]
    return {"bursts": len(every), "max_ms": max(d for d, _ in every) / 1e6 if every else 0.0,
            "per_thread": {k: {"bursts": n, "total_ms": tot / 1e6, "max_ms": mx / 1e6} for k, (n, tot, mx) in top}}


# What the bench sets in every fault run's environment besides meta["settings"].
BENCH_OWN_VARS = {"RECCL_DETECTOR", "RECCL_NICS", "RECCL_TESTBED"}


def caller_settings(runs, settings):
    """The RECCL_* variables the fault runs inherited from whoever started the bench (for example
    RECCL_FAILOVER_RT_PRIO=20), as "NAME=value" sorted: the figures depend on them, and the
    table must say so. Variables the bench sets itself are left out."""
    own = BENCH_OWN_VARS | {kv.split("=", 1)[0] for kv in settings.split()}
    seen = set()
    for name, run in runs.items():
        if not name.startswith("fault_") or not run:
            continue
        env = (run.get("environment") or {}).get("env") or {}
        seen |= {"%s=%s" % (k, v) for k, v in env.items() if k.startswith("RECCL_") and k not in own}
    return sorted(seen)


def ranks_sched(meta, inherited):
    """The ranks' scheduling: the whole rank under chrt (--fifo), or its failover threads alone
    (RECCL_FAILOVER_RT_PRIO, from the bench's settings or its caller), or neither."""
    if meta["fifo"]:
        return "SCHED_FIFO %d" % meta["fifo"]
    prio = 0
    for kv in meta["settings"].split() + inherited:
        k, _, v = kv.partition("=")
        if k == "RECCL_FAILOVER_RT_PRIO" and v.isdigit():
            prio = int(v)
    return "normal, failover threads SCHED_FIFO %d" % prio if prio else "normal"


def report(work, out):
    meta = json.load(open(os.path.join(work, "meta.json")))
    sources, rounds = meta["sources"], meta["rounds"]
    r = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
         # The ranks use rails 0 and 1; --linkwatch-busy adds a third, the neighbour's, to the testbed.
         "testbed": {"name": meta["name"], "hosts": 2, "rails": 3 if meta.get("linkwatch_busy_ms") else 2,
                     "ranks_rails": 2, "nic": meta.get("nic", "veth"), "wire_sched": meta.get("wire_sched")},
         "fault": meta.get("fault", "link"), "linkwatch_busy_ms": meta.get("linkwatch_busy_ms", 0), "size": meta["size"],
         "faults_per_source": meta["faults"], "rounds": rounds, "down_ms": meta["down_ms"],
         "period_ms": meta["period_ms"], "settings": meta["settings"],
         "runs": {}}
    if "machine" in meta:  # what else ran on the CPUs (fault_bench.sh; absent from older work folders)
        r["machine"] = dict(meta["machine"])
        waits = os.path.join(work, "waits.txt")
        if r["machine"].get("trace_waits_us") and os.path.exists(waits):
            r["machine"]["waits"] = waits_report(waits)
    bursts = None
    if r.get("machine", {}).get("trace_bursts"):
        path = os.path.join(work, "bursts.txt")
        bursts = read_bursts(path) if os.path.exists(path) else {}
        r["machine"]["kthread_bursts"] = bursts_summary(bursts)
    wrong = 0
    b1, b2 = load(work, "base_one"), load(work, "base_two")
    r["runs"]["base_one_rail"], r["runs"]["base_two_rails"] = b1, b2
    one, two = oop(b1), oop(b2)
    wrong += b1["out_of_bounds"] + b2["out_of_bounds"]
    loops, all_loop_calls = [], []
    for k in range(rounds + 1):
        bl = load(work, "base_loop_one_r%d" % k)
        r["runs"]["base_one_rail_fault_loop_r%d" % k] = bl
        wrong += 1 if bl is None else bl["out_of_bounds"] + (0 if bl["status"] == "ok" else 1)
        loops.append(loop_busbw(bl))
        if bl is not None and loops[-1] is None:
            wrong += 1  # a baseline without a call: nothing to pair with
        all_loop_calls += [i["busbw_gbps"] for i in (bl or {}).get("iterations") or []]
    one_loop = median(all_loop_calls)
    r["baseline_busbw_gbps"] = {"one_rail": one, "two_rails": two, "one_rail_fault_loop": one_loop,
                                "one_rail_fault_loop_per_round": loops}
    r["sources"] = {}
    ratios = {}
    for s in sources:
        segs, tags = [], []
        for k in range(rounds):
            f = load(work, "fault_%s_r%d" % (s, k))
            r["runs"]["fault_%s_r%d" % (s, k)] = f
            if f is None:
                wrong += 1
                continue
            wrong += f["out_of_bounds"] + (0 if f["status"] == "ok" else 1)
            segs.append(f)
            tags.append("fault_%s_r%d" % (s, k))
        if len(segs) < rounds:
            r["sources"][s] = {"error": "%d of %d rounds have no result" % (rounds - len(segs), rounds)}
            continue
        lay = lay_bursts(segs, tags, bursts) if bursts is not None else None
        x = pool_source(segs)
        if lay is not None:
            x["kthread_bursts"] = lay
        hops = hop_split(work, tags)
        if hops is not None:
            x["hops_us"] = hops
        x["rounds"] = paired_rounds(segs, loops)
        r["sources"][s] = x
        bw = x["busbw_gbps"]
        if bw["degraded"] is not None and s != "none":
            paired = [row["ratio"] for row in x["rounds"] if row["ratio"] is not None]
            x["rounds_paired"] = len(paired)
            if paired:
                # The middle of the rounds (the mean of the two middle ones for an even count).
                ratios["degraded_over_one_rail_paired_" + s] = statistics.median(paired)
            if one_loop:
                ratios["degraded_over_one_rail_fault_loop_" + s] = bw["degraded"] / one_loop
            ratios["degraded_over_one_rail_" + s] = bw["degraded"] / one
        if bw["before"] is not None and s != "none":
            ratios["before_over_two_rails_" + s] = bw["before"] / two
        if bw["after"] is not None:
            ratios["after_over_two_rails_" + s] = bw["after"] / two
    for q in ("p50", "p99"):
        base = r["sources"].get("bpf", {}).get("stall_ms", {}).get(q)
        if base:
            for s in sources:
                p = r["sources"][s].get("stall_ms", {})
                if p.get(q) and s != "bpf":
                    ratios["stall_%s_%s_over_bpf" % (q, s)] = p[q] / base
    ratios["two_rails_over_one_rail"] = two / one
    r["ratios"] = ratios
    r["caller_settings"] = caller_settings(r["runs"], meta["settings"])
    r["ranks_sched"] = ranks_sched(meta, r["caller_settings"])
    if meta["gloo"]:
        r["gloo"] = gloo_report(work, r, meta, sources)
    r["wrong_or_failed"] = wrong
    json.dump(r, open(out, "w"), indent=1)
    print_table(r, meta, sources, one, two, one_loop, ratios)
    print("wrong results or failed runs: %d" % wrong)
    print("written: %s" % out, file=sys.stderr)
    return 1 if wrong else 0


def gloo_report(work, r, meta, sources):
    gtimeout, iters = meta["gloo_timeout_ms"], meta["gloo_iters"]
    down = str(meta["down_ms"]).split("-")[-1]  # with a range of durations, Gloo's fault lasts the longest
    what = {"link": "cable down", "carrier": "carrier off"}[meta.get("fault", "link")]
    g = {"timeout_ms": gtimeout, "recover_after_ms": int(down)}
    free, rec = load(work, "gloo_free"), load(work, "gloo_recover")
    s1, s2 = load(work, "gloo_free_small1"), load(work, "gloo_free_small2")
    for k in ("gloo_free", "gloo_recover", "gloo_free_small1", "gloo_free_small2"):
        r["runs"][k] = load(work, k)
    rc_rec = int(open(os.path.join(work, "gloo_recover.rc")).read().split()[0])
    if free:
        g["busbw_fault_free_gbps"] = free["rows"][0]["in_place"]["busbw_gbps"]
    if s1 and s2 and rec and rc_rec == 0:
        tf = min(s1["rows"][0]["in_place"]["time_us"], s2["rows"][0]["in_place"]["time_us"])
        tr = rec["rows"][0]["in_place"]["time_us"]
        g["recovered_fault_extra_ms"] = (tr - tf) * iters / 1000  # the loop's time difference
        g["recovered_fault"] = "completed, loop %.0f ms longer than fault-free (%s %s ms)" % (
            g["recovered_fault_extra_ms"], what, down)
    else:
        g["recovered_fault"] = "failed (exit %d): %s" % (rc_rec, log_tail(work, "gloo_recover").strip())
    rc, ms = map(int, open(os.path.join(work, "gloo_hold.rc")).read().split()[:2])
    g["held_fault_exit_code"], g["held_fault_exit_after_ms"] = rc, ms
    if os.path.exists(os.path.join(work, "gloo_hold.hung")):
        g["held_fault"] = "hang: no error within %.1f s (stopped 30 s after its timeout)" % (ms / 1000)
    else:
        g["held_fault"] = ("error after %.1f s: %s" % (ms / 1000, log_tail(work, "gloo_hold", 2).strip().replace("\n", " | "))
                           if rc != 0 else "no error: completed (%d ms)" % ms)

    # Per iteration (rank 0's CLOCK_MONOTONIC, gloo_bench --timeline), relative to the fault, next
    # to reccl's iterations around its first fault of each source.
    def gloo_iters(tag):
        loops = (load(work, tag) or {}).get("timeline", {}).get("loops", [])
        return loops[-1] if loops else None

    def around(its, fault_ms, lo=-1000, hi=4000):
        rows = []
        for it in its:
            t = it["start_mono_ns"] / 1e6 - fault_ms
            if lo <= t <= hi:
                rows.append({"t_ms": round(t, 3), "ms": round((it["end_mono_ns"] - it["start_mono_ns"]) / 1e6, 3)})
        return rows

    def describe(rows):
        before = sorted(x["ms"] for x in rows if x["t_ms"] < 0)
        after = [x for x in rows if x["t_ms"] >= 0]
        d = {"iterations": len(rows), "median_ms_before": before[len(before) // 2] if before else None}
        if after:
            worst = max(after, key=lambda x: x["ms"])
            d["slowest_ms_after_fault"], d["slowest_started_at_ms"] = worst["ms"], worst["t_ms"]
        return d

    tl = {}
    loop = gloo_iters("gloo_recover")
    if loop and os.path.exists(os.path.join(work, "gloo_recover.fault")):
        t_down, t_up = map(int, open(os.path.join(work, "gloo_recover.fault")).read().split())
        rows = around(loop["iterations"], t_down)
        tl["gloo_recovered"] = {"bytes": loop["bytes"], "completed": loop["completed"], "fault_mono_ms": t_down,
                                "recover_after_ms": t_up - t_down, **describe(rows), "per_iteration": rows}
        # A loop that ended before the fault says nothing about it (a fast machine, few --gloo-iters).
        if loop["iterations"] and loop["iterations"][-1]["end_mono_ns"] / 1e6 < t_down:
            g.pop("recovered_fault_extra_ms", None)
            g["recovered_fault"] = "not measured: Gloo's loop ended before the fault (raise --gloo-iters or leave it auto)"
    loop = gloo_iters("gloo_hold")
    if loop:
        hold = open(os.path.join(work, "gloo_hold.rc")).read().split()
        if len(hold) > 2:  # CLOCK_MONOTONIC ms of the link-down
            t_fault = int(hold[2])
            rows = around(loop["iterations"], t_fault, hi=10 ** 9)
            tl["gloo_held"] = {"bytes": loop["bytes"], "completed": loop["completed"], "fault_mono_ms": t_fault,
                               **describe(rows), "per_iteration": rows}
    for s in sources:
        f = r["runs"].get("fault_%s_r0" % s)  # the first round's first fault
        if not f or not f.get("plan") or not f.get("faults"):
            continue
        fault_ms = f["t0_mono_ns"] / 1e6 + f["faults"][0]["at_s"] * 1000
        rows = around(f["iterations"], fault_ms)
        tl["reccl_" + s] = {"bytes": f["collective"]["bytes"], "fault_mono_ms": fault_ms, **describe(rows),
                            "per_iteration": rows}
    g["timeline"] = tl
    return g


def f2(v, d=2):
    return "-" if v is None else ("%." + str(d) + "f") % v


def print_table(r, meta, sources, one, two, one_loop, ratios):
    print()
    what = {"link": "cable down (switch port)", "carrier": "carrier off (TUNSETCARRIER)"}[meta.get("fault", "link")]
    print("allreduce %s, 2 hosts x 2 rails (%s), %s faults per source in %d rounds, %s %s ms every %s ms"
          % (meta["size"], meta.get("nic", "veth"), meta["faults"], meta["rounds"], what, meta["down_ms"],
             meta["period_ms"]))
    if meta.get("wire_sched"):
        print("the taps' forwarder (their cable and switch) at %s scheduling" % meta["wire_sched"])
    if r.get("caller_settings"):
        print("set by the caller for every rank: %s" % " ".join(r["caller_settings"]))
    if meta.get("linkwatch_busy_ms"):
        print("a neighbour NIC dropped its carrier for 20 ms every %d ms through the fault runs (link-watch busy:"
              " non-urgent changes wait for its once-a-second run)" % meta["linkwatch_busy_ms"])
    m = r.get("machine")
    if m:
        print("machine: %d DAMON kdamond(s) on at the start, %s; kdamond CPU during the run %d ms"
              % (m["damon_kdamonds_on"], "paused for the run" if m["damon_paused"] else "not paused",
                 m["kdamond_cpu_ms"]))
        w = m.get("waits")
        if w:
            # p99, not the max: runqslower also reports a few 100 ms-1 s "waits" of threads that
            # sleep on timers (round figures; seen for the listener and the standby watcher).
            print("reccl threads that waited >= %d us for a CPU in the fault runs: %d (p99 %d us); the CPU came from: %s"
                  % (m["trace_waits_us"], w["reccl_waits"], w["p99_us"],
                     ", ".join("%s %d" % kv for kv in w["cpu_from"].items())))
        b = m.get("kthread_bursts")
        if b:
            print("kernel threads that held a CPU >= 1 ms without a break, in the fault runs: %d bursts, longest %.1f ms; %s"
                  % (b["bursts"], b["max_ms"], ", ".join("%s %d (%.0f ms, longest %.1f)" % (
                      k, v["bursts"], v["total_ms"], v["max_ms"]) for k, v in b["per_thread"].items())))
    print("fault-free busbw GB/s: one rail %s, two rails %s (ratio %s); one rail in the fault loop %s (per round: %s)"
          % (f2(one, 3), f2(two, 3), f2(two / one), f2(one_loop, 3),
             " ".join(f2(b, 3) for b in r["baseline_busbw_gbps"]["one_rail_fault_loop_per_round"])))
    print("%-8s %8s %8s %8s %8s %8s %10s %10s %9s %9s %9s %9s" % (
        "source", "faults", "stall50", "stall99", "stallmax", "step99", "signal50", "switch50", "bw before",
        "during", "degraded", "after"))
    for s in sources:
        x = r["sources"][s]
        if "stall_ms" not in x:
            print("%-8s failed: %s" % (s, x.get("error", "")))
            continue
        st, bw, fs = x["stall_ms"], x["busbw_gbps"], x["first_step_ms"]
        print("%-8s %8s %8s %8s %8s %8s %10s %10s %9s %9s %9s %9s" % (
            s, "%d/%d" % (x["faults_with_failover"], x["faults"]), f2(st["p50"]), f2(st["p99"]), f2(st["max"]),
            f2(fs["p99"]), f2(x["signal_after_fault_ms"]["p50"]), f2(x["fault_to_switch_ms"]["p50"]),
            f2(bw["before"], 3), f2(bw["during"], 3), f2(bw["degraded"], 3), f2(bw["after"], 3)))
    for s in sources:
        x = r["sources"][s]
        if "missed" in x:
            m, e = x["missed"], x["missed"]["hit_call_extra_ms"]
            print("%-8s missed %d of %d faults (no failover%s)%s; wrong elements %d" % (
                s, m["faults"], x["faults"],
                ", %d of them on a rail nothing was on: the previous fault's fail-back was pending" % m["fail_back_pending"]
                if m.get("fail_back_pending") else "", "; the call each hit took p50 %s p99 %s max %s ms longer" % (
                    f2(e["p50"]), f2(e["p99"]), f2(e["max"])) if e["n"] else "", x["wrong_elements"]))
    print("(stall ms: fault syscall -> the held-up work moving on the new paths: the first step of a connection")
    print(" that had steps outstanding, the new path's start for an idle one; step99: fault -> first step")
    print(" completed on a new path, p99, which for an idle connection waits for the next call; signal: fault ->")
    print(" first fault signal; switch: first signal -> new path committed; bandwidth GB/s: median over the")
    print(" faults of each fault's window median, for during each fault's slowest call)")
    for s in sources:
        rows = r["sources"][s].get("rounds")
        if rows and s != "none":
            print("degraded / one rail in the fault loop around it, per round (%s): %s (%d of %d rounds paired)" % (
                s, " ".join(f2(row["ratio"], 3) for row in rows), r["sources"][s].get("rounds_paired", 0), len(rows)))
    for s in sources:
        b = r["sources"][s].get("kthread_bursts")
        if b:
            c = b["stall_ms_faults_without_a_burst"]
            print("%s: of %d faults over %.0f ms, %d had a kernel thread's burst in their stall (%s; kernel threads' CPU"
                  " time in such a stall, over the stall, at the median: %s); of %d within it, %d did;"
                  " stall without those faults p50 %s p99 %s max %s ms (%d faults)%s" % (
                      s, b["faults_over_goal"], GOAL_STALL_MS, b["over_goal_with_a_burst"],
                      ", ".join("%s %d" % kv for kv in b["over_goal_by_thread"].items()) or "-",
                      "-" if b["over_goal_kthread_cpu_share_p50"] is None
                      else "%.0f %%" % (100 * b["over_goal_kthread_cpu_share_p50"]),
                      b["faults_within_goal"], b["within_goal_with_a_burst"], f2(c["p50"]), f2(c["p99"]),
                      f2(c["max"]), c["n"],
                      "; %d faults in runs without a trace" % b["faults_untraced"] if b["faults_untraced"] else ""))
    for s in sources:
        x = r["sources"][s]
        inside, between = x.get("stall_ms_fault_inside_a_call"), x.get("stall_ms_fault_between_calls")
        if inside and between and (inside["n"] or between["n"]):
            print("%s: stall by where the fault fell, ms p50/p99/max: inside a call %s/%s/%s (%d faults), between calls"
                  " %s/%s/%s (%d faults)" % (s, f2(inside["p50"]), f2(inside["p99"]), f2(inside["max"]), inside["n"],
                                            f2(between["p50"]), f2(between["p99"]), f2(between["max"]), between["n"]))
    for s in sources:
        h = r["sources"][s].get("hops_us")
        if h:
            hops = ", ".join("%s %d/%d/%d" % (k.replace("_", " "), h[k]["p50"], h[k]["p90"], h[k]["p99"])
                             for k in HOPS if k in h)
            print("%s: signal -> committed per connection moved, us p50/p90/p99 (%d connections, %d moved on the "
                  "monitor thread): %s" % (s, h["connections"], h.get("on_monitor_thread", 0), hops))
    print("ratios:")
    for k, v in ratios.items():
        goal = "   (goal >= 0.9)" if k.startswith("degraded_over_one_rail_paired") else ""
        print("  %-40s %.3f%s" % (k, v, goal))
    if "gloo" in r:
        g = r["gloo"]
        print("gloo (rail0 only): fault recovered after %s ms: %s" % (g.get("recover_after_ms", meta["down_ms"]),
                                                                    g["recovered_fault"]))
        print("gloo: fault held: %s" % g["held_fault"])
        print("per iteration around the fault (ms; t = iteration start after the fault):")
        print("  %-16s %10s %10s %12s %12s %11s" % ("run", "bytes", "iters", "median before", "slowest after", "at t ms"))
        for k, v in g["timeline"].items():
            print("  %-16s %10d %10d %12s %12s %11s" % (k, v["bytes"], v["iterations"], f2(v.get("median_ms_before")),
                  f2(v.get("slowest_ms_after_fault")), f2(v.get("slowest_started_at_ms"), 1)))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: fault_report.py WORK OUT", file=sys.stderr)
        sys.exit(64)
    sys.exit(report(sys.argv[1], sys.argv[2]))
