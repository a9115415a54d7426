"""isend/irecv over the reccl backend survive a pulled cable, bit for bit.

On a fresh 2-host x 2-rail testbed, one rank per host (p2p_exchange_worker.py: both ranks isend
then irecv 4 MiB each round, every element checked):
  1. no fault: every round right, the pace measured;
  2. host 0's rail-0 cable pulled (at the switch) after round 20 for 1 s and plugged back, the run
     going on until a second after the plug-in (a stop file): every round of both ranks right,
     rounds completed while the cable was out and after it was back, and failovers counted
     (the lanes, two-rank communicators the messages travel on, and the group's).

    sudo PYTHONPATH=build/torch /usr/bin/python3 tests/integration/torch/p2p_fault_test.py --reccl build/bin/reccl
Exit 0 passed, 1 failed, 77 skipped (not root, no torch or reccl_torch).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench", "torch_ddp"))
from ddp_testbed import (PYTHON, Testbed, ends_around_fault, fail, link_down, plan_events,  # noqa: E402
                         read_ranks, require_root_and_torch)

ROUNDS = 400
FAULT_AT_ROUND = 20
DOWN_MS = 1000
RUN_TIMEOUT_S = 400


def check_right(ranks, what):
    for r in ranks:
        if r["wrong"]:
            fail(f"{what}: rank {r['rank']} received wrong data in rounds {r['wrong'][:10]}")
    if ranks[0]["rounds"] != ranks[1]["rounds"]:
        fail(f"{what}: the ranks ended after {ranks[0]['rounds']} and {ranks[1]['rounds']} rounds")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reccl", required=True, help="the reccl CLI")
    args = ap.parse_args()
    require_root_and_torch(args.reccl)
    worker = os.path.join(HERE, "p2p_exchange_worker.py")
    with tempfile.TemporaryDirectory(prefix="reccl-p2p-fault-") as work, \
            Testbed(args.reccl, hosts=2, rails=2, pythonpath=os.environ.get("PYTHONPATH")) as tb:
        clean_dir = os.path.join(work, "clean")
        run = tb.start_ranks([PYTHON, worker, "--out", clean_dir, "--rounds", str(ROUNDS), "-q"])
        if run.wait(RUN_TIMEOUT_S) != 0:
            fail("the fault-free run failed", run)
        clean = read_ranks(clean_dir, 2)
        check_right(clean, "fault-free")
        if clean[0]["rounds"] != ROUNDS:
            fail(f"the fault-free run ended after {clean[0]['rounds']} of {ROUNDS} rounds")
        round_s = statistics.median(clean[0]["round_s"][1:])
        print(f"fault-free: {ROUNDS} rounds of 4 MiB each way, median round {round_s * 1000:.1f} ms")

        fault_dir = os.path.join(work, "fault")
        stop = os.path.join(work, "stop")
        log = os.path.join(work, "fault-plan.jsonl")
        run = tb.start_ranks([PYTHON, worker, "--out", fault_dir, "--rounds", "1000000", "--stop-file", stop])
        if not run.wait_for_step(FAULT_AT_ROUND, RUN_TIMEOUT_S):
            fail(f"the run did not reach round {FAULT_AT_ROUND}", run)
        plan = tb.start_plan([link_down(tb.host_netns(0), "rail0", at_ms=0, duration_ms=DOWN_MS)], log)
        plan_out, _ = plan.communicate(timeout=120)
        time.sleep(1.0)  # rounds after the plug-in
        open(stop, "w").close()
        rc = run.wait(RUN_TIMEOUT_S)
        if plan.returncode != 0:
            fail(f"the fault plan failed: {plan_out}")
        if rc != 0:
            fail("the run did not survive the fault", run)
        faulted = read_ranks(fault_dir, 2)
        check_right(faulted, "under the fault")
        ends = faulted[0]["round_end_ns"]
        during, after = ends_around_fault(ends, log)
        down_ns, _ = plan_events(log)
        failovers = sum(r["stats"]["failovers"] for r in faulted)
        if during < 1 or after < 1:
            fail(f"the fault did not fall inside the run ({during} rounds while out, {after} after)")
        longest = max(t for t, e in zip(faulted[0]["round_s"], ends) if down_ns < e)
        print(f"fault: rail 0 of host 0 out for {DOWN_MS} ms from round {FAULT_AT_ROUND}: {during} rounds done while "
              f"it was out, {after} after; longest round from the fault on {longest * 1000:.1f} ms (fault-free median "
              f"{round_s * 1000:.1f} ms); {failovers} failovers; every element right")
        if failovers < 1:
            fail(f"no failover was counted: {[r['stats'] for r in faulted]}")
    print("ok")


if __name__ == "__main__":
    main()
