"""DDP training over the reccl backend survives a pulled cable; over gloo it does not.

On a fresh 2-host x 2-rail testbed, one rank per host (examples/ddp_train.py):
  1. reccl, no fault: the reference losses;
  2. the same under torchrun on the testbed hosts: the same losses bit for bit;
  3. reccl while a fault plan pulls host 0's rail-0 cable (at the switch) mid-training and plugs
     it back: every rank's per-step losses equal run 1's bit for bit, steps completed while the
     cable was out and after it was back, and the communicators counted failovers;
  4. gloo (GLOO_SOCKET_IFNAME=rail0, process group timeout --gloo-timeout s) while the plan holds
     the same cable out: the run stalls and fails with gloo's timeout error, no sooner than the
     timeout and within a bound after it.

    sudo PYTHONPATH=build/torch /usr/bin/python3 tests/integration/torch/ddp_fault_test.py \\
        --reccl build/bin/reccl --example examples/ddp_train.py
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

STEPS = 200
FAULT_AT_STEP = 10
# A small model keeps a step short on a loaded 2-vCPU machine; its gradients (~340 KB) still go
# by the ring allreduce, split over both rails' channels.
MODEL = ["--width", "256", "--layers", "2", "--batch", "32"]
RUN_TIMEOUT_S = 400


def check_same_losses(ref, got, what):
    for r, (a, b) in enumerate(zip(ref, got)):
        if a["losses"] != b["losses"]:
            k = next(i for i, (x, y) in enumerate(zip(a["losses"], b["losses"])) if x != y)
            fail(f"{what}: rank {r} step {k} loss {float.fromhex(b['losses'][k])!r} differs from the fault-free "
                 f"{float.fromhex(a['losses'][k])!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reccl", required=True, help="the reccl CLI")
    ap.add_argument("--example", required=True, help="examples/ddp_train.py")
    ap.add_argument("--gloo-timeout", type=float, default=5.0, help="gloo's process group timeout, seconds")
    args = ap.parse_args()
    require_root_and_torch(args.reccl)
    with tempfile.TemporaryDirectory(prefix="reccl-ddp-fault-") as work:
        run_all(args, work)
    print("ok")


def run_all(args, work):
    common = ["--backend", "reccl", "--steps", str(STEPS)] + MODEL

    with Testbed(args.reccl, hosts=2, rails=2, pythonpath=os.environ.get("PYTHONPATH")) as tb:
        # 1. Reference.
        clean_dir = os.path.join(work, "clean")
        run = tb.start_ddp(args.example, clean_dir, common + ["-q"])
        if run.wait(RUN_TIMEOUT_S) != 0:
            fail("the fault-free reccl run failed", run)
        clean = read_ranks(clean_dir, 2)
        step_s = statistics.median(clean[0]["step_s"][1:])
        print(f"fault-free: {STEPS} steps, median step {step_s * 1000:.1f} ms, fault source "
              f"{clean[0]['fault_source']}")

        # 2. Under torchrun on each host (Debian's torchrun needs --redirects/--tee other than its
        # default "0" on Python 3.11; "9:0" names no local rank, i.e. no redirection).
        tr_dir = os.path.join(work, "torchrun")
        launcher = (f'exec {PYTHON} -m torch.distributed.run --redirects 9:0 --tee 9:0 --nnodes 2 '
                    f'--nproc_per_node 1 --node_rank "$GROUP_RANK" --master_addr "$MASTER_ADDR" '
                    f'--master_port "$MASTER_PORT" "$0" "$@"')
        run = tb.start_ranks(["sh", "-c", launcher, args.example, "--out", tr_dir] + common + ["-q"])
        if run.wait(RUN_TIMEOUT_S) != 0:
            fail("the torchrun reccl run failed", run)
        check_same_losses(clean, read_ranks(tr_dir, 2), "torchrun")
        print("torchrun on the testbed: losses equal to the fault-free run bit for bit")

        # 3. A cable pulled mid-training and plugged back. The cable stays out for a third of
        # what is left of the run at the measured pace (0.5-3 s), so steps finish on both sides
        # of the plug-in.
        down_ms = int(min(3000, max(500, (STEPS - FAULT_AT_STEP) * step_s * 1000 / 3)))
        fault_dir = os.path.join(work, "fault")
        log = os.path.join(work, "fault-plan.jsonl")
        run = tb.start_ddp(args.example, fault_dir, common)
        if not run.wait_for_step(FAULT_AT_STEP, RUN_TIMEOUT_S):
            fail(f"the reccl run did not reach step {FAULT_AT_STEP}", run)
        plan = tb.start_plan([link_down(tb.host_netns(0), "rail0", at_ms=0, duration_ms=down_ms)], log)
        rc = run.wait(RUN_TIMEOUT_S)
        plan_out, _ = plan.communicate(timeout=60)
        if plan.returncode != 0:
            fail(f"the fault plan failed: {plan_out}")
        if rc != 0:
            fail("the reccl run did not survive the fault", run)
        faulted = read_ranks(fault_dir, 2)
        check_same_losses(clean, faulted, "under the fault")
        down_ns, _ = plan_events(log)
        ends = faulted[0]["step_end_ns"]
        during, after = ends_around_fault(ends, log)
        failovers = sum(r["stats"]["failovers"] for r in faulted)
        failbacks = sum(r["stats"]["failbacks"] for r in faulted)
        # For the record (not asserted): the longest step of the fault window, the stall a step saw.
        longest = max(t for t, e in zip(faulted[0]["step_s"], ends) if down_ns < e)
        print(f"fault: rail 0 of host 0 out for {down_ms} ms from step {FAULT_AT_STEP}: {during} steps done while "
              f"it was out, {after} after; longest step from the fault on {longest * 1000:.1f} ms (fault-free median "
              f"{step_s * 1000:.1f} ms); {failovers} failovers, {failbacks} failbacks; losses equal to the fault-free "
              f"run bit for bit")
        if during < 1 or after < 1:
            fail(f"the fault did not fall inside the run ({during} steps while out, {after} after)")
        if failovers < 1:
            fail(f"no failover was counted: {[r['stats'] for r in faulted]}")

        # 4. gloo under the same fault, held until gloo gave up.
        gloo_dir = os.path.join(work, "gloo")
        gloo_args = ["--backend", "gloo", "--steps", "100000", "--timeout", str(args.gloo_timeout)] + MODEL
        run = tb.start_ddp(args.example, gloo_dir, gloo_args, env={"GLOO_SOCKET_IFNAME": "rail0"})
        if not run.wait_for_step(FAULT_AT_STEP, RUN_TIMEOUT_S):
            fail(f"the gloo run did not reach step {FAULT_AT_STEP}", run)
        hold_ms = int((args.gloo_timeout + 120) * 1000)
        plan = tb.start_plan([link_down(tb.host_netns(0), "rail0", at_ms=0, duration_ms=hold_ms)],
                             os.path.join(work, "gloo-plan.jsonl"))
        t0 = time.monotonic()
        try:
            rc = run.wait(args.gloo_timeout + 110)
        except Exception:
            fail("gloo did not fail within its timeout + 110 s under the fault", run)
        finally:
            plan.terminate()  # the plan puts the cable back when stopped
            plan.communicate(timeout=60)
        took = time.monotonic() - t0
        out = run.output()
        if rc == 0:
            fail("gloo finished under the fault", run)
        if "timeout" not in out.lower() and "timed out" not in out.lower():
            fail("gloo failed without its timeout error", run)
        if took < args.gloo_timeout:
            fail(f"gloo failed after {took:.1f} s, before its {args.gloo_timeout} s timeout", run)
        line = next((ln.strip() for ln in out.splitlines() if "timeout" in ln.lower() or "timed out" in ln.lower()), "")
        print(f"gloo under the same fault: failed after {took:.1f} s (timeout {args.gloo_timeout} s): {line}")


if __name__ == "__main__":
    main()
