"""Runs a test function as the ranks of a torch.distributed job: one process per rank (forked from
a fork server that has imported torch and nothing else, so each rank has its own reccl and gloo
state and none pays torch's import), a FileStore in a temporary folder to rendezvous, a deadline
for the whole job. Shared by the backend's single-host tests.

    results = run_ranks(2, my_fn, args=(...,), env={"RECCL_SHM_DISABLE": "1"})

my_fn(rank, world, store_url, *args) runs in each rank and returns something picklable; an
exception in any rank fails the job with every rank's traceback. A rank in `may_die` may end
without a result (its result is then None): for tests that kill a rank on purpose.
"""

import ctypes
import multiprocessing
import os
import queue
import random
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback

SKIP = 77
PR_SET_PDEATHSIG = 1


def require_backend():
    """Imports torch and reccl_torch, or exits 77 (ctest: skipped) saying what is missing."""
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
        if not dist.is_available():
            raise ImportError("torch.distributed is not available in this torch build")
        import reccl_torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e} (run with /usr/bin/python3 and PYTHONPATH=<build>/torch)", file=sys.stderr)
        sys.exit(SKIP)


def _child(fn, rank, world, store_url, args, env, results):
    # Die with the parent, the fork server, which ends when the test process does (a test runner's
    # timeout kills only that one): no rank lingers as an orphan.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:
        os._exit(1)
    os.environ.update(env)
    try:
        results.put((rank, True, fn(rank, world, store_url, *args)))
    except BaseException:  # every failure goes back to the parent with its traceback
        results.put((rank, False, traceback.format_exc()))
        raise SystemExit(1)


def free_port():
    """A TCP port free now and outside the kernel's ephemeral range (as the C++ tests' freePort):
    no connection or port-0 listener of a test running beside this one is given it before the
    caller's launcher binds it."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = map(int, f.read().split())
    lo, hi = (10000, low - 1) if low - 1 - 10000 >= 1000 else (high + 1, 65535)
    for _ in range(1000):
        port = random.randint(lo, hi)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("", port))
            except OSError:
                continue
        return port
    raise SystemExit("no free TCP port outside the ephemeral range")


def run_ranks(world, fn, args=(), env=None, timeout=240, may_die=()):
    ctx = multiprocessing.get_context("forkserver")
    # The server imports torch once; each rank is a fork of it. Nothing the ranks test (reccl,
    # gloo, the store) exists in the server, which starts no thread of its own.
    ctx.set_forkserver_preload(["torch"])
    tmp = tempfile.mkdtemp(prefix="reccl-torch-test-")
    store_url = "file://" + os.path.join(tmp, "store")
    results = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(fn, r, world, store_url, args, env or {}, results), daemon=True)
             for r in range(world)]
    try:
        for p in procs:
            p.start()
        got = {}
        silent_death = {}  # rank -> when its process was first seen dead without a result
        deadline = time.monotonic() + timeout
        while len(got) < world:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"ranks {sorted(set(range(world)) - set(got))} gave no result within {timeout} s")
            try:
                rank, ok, value = results.get(timeout=min(left, 0.5))
                got[rank] = (ok, value)
            except queue.Empty:
                # A rank that died without a word (os._exit, a signal), once its message had a
                # second to arrive.
                now = time.monotonic()
                for r, p in enumerate(procs):
                    if r not in got and p.exitcode not in (None, 0):
                        silent_death.setdefault(r, now)
                late = [r for r, t in silent_death.items() if r not in got and now - t > 1.0]
                for r in [r for r in late if r in may_die]:
                    got[r] = (True, None)
                late = [r for r in late if r not in may_die]
                if late:
                    raise AssertionError(f"rank(s) {late} died: exit codes {[procs[r].exitcode for r in late]}")
        failed = {r: v for r, (ok, v) in got.items() if not ok}
        if failed:
            raise AssertionError("\n".join(f"--- rank {r} failed:\n{tb}" for r, tb in sorted(failed.items())))
        return [got[r][1] for r in range(world)]
    finally:
        for p in procs:
            if p.pid is None:  # never started
                continue
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
        shutil.rmtree(tmp, ignore_errors=True)
