"""Failures of the reccl backend reach Python as exceptions carrying reccl's message, and the
process group's timeout is honoured. One scenario per run (--case), two ranks on this host:

  arguments       refused arguments raise at the call, naming the argument; the group still works
  mismatch        ranks disagreeing on a count: both raise, one with reccl's "mismatched count"
                  message; later calls fail at once with the same, latched message
  mismatch_move   the same for a broadcast: the count in elements, as the caller gave it
  init_failure    rank 0 cannot make the unique id: it raises reccl's message, rank 1 raises
                  "rank 0 could not create the communicator" with it, without waiting for a timeout
  peer_death      a rank exits mid-job: the other's next collective raises reccl's remote error
  init_timeout    a group one rank never makes: the other's init raises at the group's timeout,
                  not at reccl's default bootstrap timeout (30 s)
  timeout_wait    a collective nobody joins: wait() raises at the group's timeout; later calls fail
  timeout_future  the same through the future DDP waits on: reccl's own deadline (the group's
                  timeout, the communicator's config) fails the call
  wait_timeout    wait(timeout) shorter than the group's: raises then; destroying the group ends
                  the call still inside reccl (abort) instead of waiting out the group's timeout
  p2p_late_peer   isend/irecv whose peer issues its side 3 s later, with RECCL_BOOTSTRAP_TIMEOUT_MS
                  at 1 s: the lanes wait for the peer as long as the group's timeout allows
  p2p_wait_timeout  isend/irecv to a peer that never answers, wait(timeout): raises then, and
                  destroying the group gives up the lanes still waiting for the peer
  p2p_id_failure  a lane whose sender cannot make its unique id: both ends raise its reason at
                  once, without libtorch's backtrace
  p2p_destroy_drains  an isend never waited on, its sender's group destroyed before the peer
                  receives: delivered all the same (the destroy runs what the lanes hold)
  p2p_rank_leaves  3 ranks, rank 0 destroys its group early: ranks 1 and 2 make new lanes
                  between themselves all the same
  p2p_lane_errors  send and recv whose peer never comes: each fails with its own lane's reason
  p2p_peer_death[_tcp]  isend to a peer that died: a new lane gives up as soon as the group's
                  communicator knows, not at the group's timeout (shared memory; TCP)

    PYTHONPATH=build/torch /usr/bin/python3 tests/unit/torch/errors_test.py --case mismatch
"""

import argparse
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ranks import require_backend, run_ranks  # noqa: E402

# The deadlines these tests give are short; "at the timeout" allows this much for a loaded machine.
SLACK_S = 10.0


def _init(rank, world, store_url, timeout_s=60.0):
    import torch.distributed as dist
    import reccl_torch  # noqa: F401
    dist.init_process_group("reccl", init_method=store_url, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return dist


def _raises(fn):
    """The RuntimeError fn raises (fails when it raises nothing) and how long fn took."""
    t0 = time.monotonic()
    try:
        fn()
    except RuntimeError as e:
        return str(e), time.monotonic() - t0
    raise AssertionError("expected a RuntimeError, nothing was raised")


def _expect(text, *parts):
    for p in parts:
        assert p in text, f"expected {p!r} in the error, got: {text}"


def case_arguments(rank, world, store_url):
    import torch
    dist = _init(rank, world, store_url)
    msg, _ = _raises(lambda: dist.all_reduce(torch.ones(4, 4).t()))
    _expect(msg, "reccl: tensors: must be contiguous")
    msg, _ = _raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)))
    _expect(msg, "reccl: dtype: reccl cannot reduce")
    msg, _ = _raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND))
    _expect(msg, "reccl: op: ReduceOp.BAND is not supported")
    msg, _ = _raises(lambda: dist.broadcast(torch.ones(4), src=world + 3))
    _expect(msg, "reccl: rootRank: ")
    msg, _ = _raises(lambda: dist.send(torch.ones(4), (rank + 1) % world, tag=3))
    _expect(msg, "reccl: tag: 3 is not supported")
    msg, _ = _raises(lambda: dist.all_gather([torch.ones(3)] * world, torch.ones(4)))
    _expect(msg, "reccl: tensor_list[0]: 3 elements, the input has 4")
    # A rank's part for itself is 1 row in the input and 2 in the output.
    out_splits = [2 if p == rank else 1 for p in range(world)]
    msg, _ = _raises(lambda: dist.all_to_all_single(torch.zeros(world + 1), torch.ones(world),
                                                    out_splits, [1] * world))
    _expect(msg, "this rank's part for itself is 4 bytes in the input and 8 bytes in the output")
    msg, _ = _raises(lambda: dist.all_to_all([torch.zeros(2 if p == rank else 1) for p in range(world)],
                                             [torch.ones(1)] * world))
    _expect(msg, "this rank's tensors for itself differ in size")
    # Refused at the call: nothing reached reccl, the group works on.
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [world * (world + 1) / 2] * 5, t
    dist.destroy_process_group()


def case_mismatch(rank, world, store_url):
    import torch
    dist = _init(rank, world, store_url)
    first, _ = _raises(lambda: dist.all_reduce(torch.ones(100 - rank)))
    _expect(first, f"reccl allreduce failed on rank {rank}: ")
    again, took = _raises(lambda: dist.all_reduce(torch.ones(8)))
    assert again == first, f"later calls should fail with the latched error {first!r}, got {again!r}"
    assert took < SLACK_S, took
    dist.destroy_process_group()
    return first


def case_mismatch_move(rank, world, store_url):
    import torch
    dist = _init(rank, world, store_url)
    # Data movement names a mismatch in elements and dtypes, as the caller wrote them (not in
    # the bytes reccl moves): 100 float32 on rank 0, 99 on rank 1.
    # The receiver finds it; the root may have sent and returned.
    try:
        dist.broadcast(torch.ones(100 - rank), src=0)
        msg = ""
    except RuntimeError as e:
        msg = str(e)
    dist.destroy_process_group()
    return msg


def case_init_failure(rank, world, store_url):
    if rank == 0:
        os.environ["RECCL_BOOTSTRAP_IFNAME"] = "nosuchnic0"
    try:
        _init(rank, world, store_url)
    except RuntimeError as e:
        msg = str(e)
        _expect(msg, "RECCL_BOOTSTRAP_IFNAME=nosuchnic0 names no interface")
        if rank != 0:
            _expect(msg, "rank 0 could not create the communicator")
        return
    raise AssertionError("init should have failed")


def case_peer_death(rank, world, store_url):
    import torch
    dist = _init(rank, world, store_url)
    t = torch.ones(1000)
    dist.all_reduce(t)
    if rank == 1:
        os._exit(3)  # no goodbye: the socket or shared-memory side channel closes with the process
    msg, took = _raises(lambda: dist.all_reduce(torch.ones(1000)))
    _expect(msg, "reccl allreduce failed on rank 0: remote process exited or there was a network error")
    assert took < SLACK_S, f"the peer's death took {took:.1f} s to surface"
    dist.destroy_process_group()


def _nobody_joins(rank, world, store_url, timeout_s, on_rank0):
    """Rank 0 runs on_rank0(group) on a reccl process group with the timeout under test while rank
    1 makes no call on it. The group is made directly (not by new_group, whose store barrier
    would run with that short timeout too) beside a default group with a long one: the ranks'
    processes may start seconds apart on a loaded machine, and the store's reads wait only that
    long."""
    import reccl_torch
    dist = _init(rank, world, store_url)
    store = dist.distributed_c10d._get_default_store()
    group = reccl_torch.ProcessGroupReccl(dist.PrefixStore("under_test", store), rank, world,
                                          datetime.timedelta(seconds=timeout_s))
    result = None
    if rank == 0:
        try:
            result = on_rank0(group)
        finally:
            store.set("rank0_done", "1")
    else:
        store.wait(["rank0_done"], datetime.timedelta(seconds=120))
    t0 = time.monotonic()
    del group  # the last reference: destroys the group
    took = time.monotonic() - t0
    assert took < SLACK_S, f"destroying the group took {took:.1f} s"
    dist.destroy_process_group()
    return result


def case_init_timeout(rank, world, store_url):
    import reccl_torch
    dist = _init(rank, world, store_url)
    store = dist.distributed_c10d._get_default_store()
    took = None
    if rank == 0:
        try:
            msg, took = _raises(lambda: reccl_torch.ProcessGroupReccl(
                dist.PrefixStore("alone", store), rank, world, datetime.timedelta(seconds=3)))
            _expect(msg, "init")
            assert 3.0 <= took < 3.0 + SLACK_S, f"init raised after {took:.2f} s, the group's timeout is 3 s"
        finally:
            store.set("rank0_done", "1")
    else:
        store.wait(["rank0_done"], datetime.timedelta(seconds=120))
    dist.destroy_process_group()
    return took


def case_timeout_wait(rank, world, store_url):
    import torch

    def on_rank0(group):
        msg, took = _raises(lambda: group.allreduce([torch.ones(8)]).wait())
        assert 2.0 <= took < 2.0 + SLACK_S, f"raised after {took:.2f} s, the group's timeout is 2 s"
        _expect(msg, "reccl allreduce ")
        assert "2000 ms" in msg or "timeout" in msg, msg
        again, took2 = _raises(lambda: group.barrier().wait())
        assert again == msg and took2 < SLACK_S, (again, took2)
        return took
    return _nobody_joins(rank, world, store_url, 2.0, on_rank0)


def case_timeout_future(rank, world, store_url):
    import torch

    def on_rank0(group):
        fut = group.allreduce([torch.ones(8)]).get_future()
        msg, took = _raises(fut.wait)
        # Not the Work's own deadline: reccl's call failed at its collective deadline.
        _expect(msg, "reccl allreduce failed on rank 0: timeout")
        assert 2.0 <= took < 2.0 + SLACK_S, f"raised after {took:.2f} s, the group's timeout is 2 s"
        return took
    return _nobody_joins(rank, world, store_url, 2.0, on_rank0)


def case_wait_timeout(rank, world, store_url):
    import torch

    def on_rank0(group):
        work = group.allreduce([torch.ones(8)])
        msg, took = _raises(lambda: work.wait(datetime.timedelta(seconds=1)))
        _expect(msg, "reccl allreduce on rank 0 did not complete within 1000 ms (the timeout given to wait)")
        assert 1.0 <= took < 1.0 + SLACK_S, took
        again, _ = _raises(lambda: group.allreduce([torch.ones(8)]).wait())
        assert again == msg, again
        return took
    # The group's timeout (reccl's deadline for the call still in flight) is far away: only the
    # abort on destruction keeps _nobody_joins' bound on destroying the group.
    return _nobody_joins(rank, world, store_url, 300.0, on_rank0)


def case_p2p_late_peer(rank, world, store_url):
    import torch
    dist = _init(rank, world, store_url)
    # The lanes (one two-rank communicator per direction) are made when their first message is
    # issued, so their set-up waits for the peer's side: as long as the group's timeout, whatever
    # the environment's bootstrap deadline says.
    os.environ["RECCL_BOOTSTRAP_TIMEOUT_MS"] = "1000"
    peer = 1 - rank
    if rank == 1:
        time.sleep(3.0)
    n = (2 << 20) + 3  # 8 MiB: more than the channel's slots hold
    out = torch.empty(n, dtype=torch.int32)
    x = torch.arange(n, dtype=torch.int32) * 3 + rank
    reqs = [dist.isend(x, peer), dist.irecv(out, peer)]
    for r in reqs:
        r.wait()
    want = torch.arange(n, dtype=torch.int32) * 3 + peer
    assert torch.equal(out, want), "the message arrived changed"
    dist.destroy_process_group()
    return True


def _p2p_peer_death(rank, world, store_url):
    import torch
    dist = _init(rank, world, store_url)
    dist.all_reduce(torch.ones(8))
    if rank == 1:
        os._exit(3)
    time.sleep(0.5)  # rank 1 is gone; its lanes to rank 0 were never made
    msg, took = _raises(lambda: dist.isend(torch.ones(1 << 20), 1).wait())
    _expect(msg, "reccl send to rank 1 failed on rank 0: the process group's communicator lost its connection to "
            "rank 1")
    assert took < SLACK_S, f"the peer's death took {took:.1f} s to fail a new lane (the group's timeout is 60 s)"
    again, took2 = _raises(lambda: dist.irecv(torch.empty(8), 1).wait())
    assert again == msg and took2 < SLACK_S, (again, took2)
    dist.destroy_process_group()
    return took


def case_p2p_peer_death(rank, world, store_url):
    return _p2p_peer_death(rank, world, store_url)


def case_p2p_peer_death_tcp(rank, world, store_url):
    os.environ["RECCL_SHM_DISABLE"] = "1"
    return _p2p_peer_death(rank, world, store_url)


def case_p2p_lane_errors(rank, world, store_url):
    import torch

    def on_rank0(group):
        # Neither lane's peer comes; each lane's operations fail with that lane's own reason,
        # whichever lane's failure the group latched first.
        send = group.send([torch.ones(8)], 1, 0).get_future()
        recv = group.recv([torch.empty(8)], 1, 0).get_future()
        sent, took = _raises(send.wait)
        received, _ = _raises(recv.wait)
        _expect(sent, "reccl send to rank 1 failed on rank 0: ")
        _expect(received, "reccl recv from rank 1 failed on rank 0: ")
        assert "Exception raised from" not in sent + received, "a C++ backtrace in the message"
        assert took < 2.0 + SLACK_S, took
        return took
    return _nobody_joins(rank, world, store_url, 2.0, on_rank0)


def case_p2p_id_failure(rank, world, store_url):
    import torch
    dist = _init(rank, world, store_url)
    if rank == 0:
        os.environ["RECCL_BOOTSTRAP_IFNAME"] = "nosuchnic0"  # its lane cannot make a unique id
        msg, took = _raises(lambda: dist.isend(torch.ones(8), 1).wait())
        _expect(msg, "reccl send to rank 1 (unique id) failed on rank 0: ", "nosuchnic0")
    else:
        msg, took = _raises(lambda: dist.irecv(torch.empty(8), 0).wait())
        _expect(msg, "reccl recv from rank 0 failed on rank 1: rank 0 could not create the communicator: ",
                "nosuchnic0")
    assert "Exception raised from" not in msg, f"a C++ backtrace in the message: {msg}"
    assert took < SLACK_S, took
    dist.destroy_process_group()
    return msg


def case_p2p_destroy_drains(rank, world, store_url):
    import torch
    dist = _init(rank, world, store_url)
    n = 1 << 20
    if rank == 0:
        dist.isend(torch.arange(n, dtype=torch.int32), 1)  # never waited on
        t0 = time.monotonic()
        dist.destroy_process_group()  # runs what the lanes hold, as gloo's does
        return time.monotonic() - t0
    time.sleep(2.0)  # rank 0 is inside its destroy by now
    out = torch.empty(n, dtype=torch.int32)
    dist.irecv(out, 0).wait()
    assert torch.equal(out, torch.arange(n, dtype=torch.int32)), "the message arrived changed"
    dist.destroy_process_group()
    return True


def case_p2p_rank_leaves(rank, world, store_url):
    import torch
    dist = _init(rank, world, store_url)
    dist.all_reduce(torch.ones(8))  # the group's communicator connects its ring: 1 and 2 hold 0
    if rank == 0:
        dist.destroy_process_group()  # done early; ranks 1 and 2 go on with messages of their own
        return True
    time.sleep(1.0)
    peer = 3 - rank
    n = 1 << 20
    out = torch.empty(n, dtype=torch.int32)
    reqs = [dist.isend(torch.arange(n, dtype=torch.int32) + rank, peer), dist.irecv(out, peer)]
    for r in reqs:
        r.wait()
    assert torch.equal(out, torch.arange(n, dtype=torch.int32) + peer), "the message arrived changed"
    dist.destroy_process_group()
    return True


def case_p2p_wait_timeout(rank, world, store_url):
    import torch

    def on_rank0(group):
        send = group.send([torch.ones(1 << 20)], 1, 0)  # its lane's init waits for rank 1
        recv = group.recv([torch.empty(8)], 1, 0)        # its lane polls the store for rank 1's id
        msg, took = _raises(lambda: send.wait(datetime.timedelta(seconds=1)))
        _expect(msg, "reccl send on rank 0 did not complete within 1000 ms (the timeout given to wait)")
        assert 1.0 <= took < 1.0 + SLACK_S, took
        again, _ = _raises(lambda: recv.wait())
        _expect(again, "reccl recv from rank 1 failed on rank 0: the process group failed (" + msg + ")")
        return took
    # Only giving up on the group's failure keeps _nobody_joins' bound on destroying the group:
    # the lanes' own deadline, the group's timeout, is far away.
    return _nobody_joins(rank, world, store_url, 300.0, on_rank0)


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    args = ap.parse_args()
    require_backend()
    may_die = (1,) if args.case in ("peer_death", "p2p_peer_death", "p2p_peer_death_tcp") else ()
    world = 3 if args.case == "p2p_rank_leaves" else 2
    results = run_ranks(world, CASES[args.case], may_die=may_die, timeout=300)
    if args.case == "mismatch":
        assert any("mismatched count across ranks" in m for m in results), results
    if args.case == "mismatch_move":
        assert any("mismatched count across ranks: this rank has 99, rank 0 has 100" in m or
                   "mismatched count across ranks: this rank has 100, rank 1 has 99" in m for m in results), results
    print(f"ok: {args.case}: {results}")


if __name__ == "__main__":
    main()
