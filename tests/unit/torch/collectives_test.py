"""Every collective of the reccl backend gives, bit for bit, what the gloo backend gives on the
same inputs, for every dtype the backend claims (docs/torch.md).

Each rank runs a gloo default group and a reccl group side by side. Where gloo has no kernel for a
dtype the reference is gloo on a lossless stand-in (the bytes as uint8 for data movement, float32
for bfloat16 reductions); where gloo has no such call (all_gather_into_tensor, reduce_scatter,
all_to_all of lists, ReduceOp.AVG and PREMUL_SUM) it is composed from gloo calls that exist. Inputs are small
integers, so every reduction order gives the same bits and any difference is a real one.

    PYTHONPATH=build/torch /usr/bin/python3 tests/unit/torch/collectives_test.py [--world 3] [--tcp]
"""

import argparse
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ranks import require_backend, run_ranks  # noqa: E402

REDUCE_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64"]
# Data movement moves bytes, so any dtype works; these cover every element size and kind.
MOVE_DTYPES = REDUCE_DTYPES + ["bool", "int16", "complex64"]
OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM"]


def _cases(world):
    """(collective, dtype, op, count, extra) for everything checked, the same on every rank."""
    for dt in REDUCE_DTYPES:
        for op in OPS:
            for n in (1, 7, 1003):
                yield ("all_reduce", dt, op, n, None)
            yield ("reduce", dt, op, 7, world - 1)
            yield ("reduce_scatter", dt, op, 7, None)
            yield ("reduce_scatter_tensor", dt, op, 1003, None)
    # Several ring rounds and chunks (512 KiB steps): 4 MiB and 2 MiB messages.
    yield ("all_reduce", "float32", "SUM", (1 << 20) + 3, None)
    yield ("all_reduce", "bfloat16", "MAX", (1 << 20) + 3, None)
    yield ("all_reduce_coalesced", "float32", "SUM", 1003, None)
    yield ("all_reduce_coalesced", "int32", "MAX", 7, None)
    for dt in MOVE_DTYPES:
        for root in (0, world - 1):
            yield ("broadcast", dt, None, 1003, root)
        for n in (1, 1003):
            yield ("all_gather", dt, None, n, None)
        yield ("all_gather_into_tensor", dt, None, 7, None)
        yield ("all_to_all_single", dt, None, 5, "even")
        yield ("all_to_all_single", dt, None, 3, "uneven")
        yield ("all_to_all", dt, None, 4, None)
        yield ("gather", dt, None, 7, world - 1)
        yield ("scatter", dt, None, 7, world - 1)
        yield ("send_recv_ring", dt, None, 1003, None)
    yield ("send_recv_ring", "float32", None, (1 << 20) + 3, None)
    yield ("send_recv_in_order", "int64", None, 7, None)
    # Outside batch_isend_irecv, in the order that needs each direction to move on its own: every
    # rank sends to every other first, two messages each (kept in order), then receives. 8 MiB
    # messages outgrow the channel's slots, so a rank's sends complete only once its peers receive.
    yield ("isend_before_irecv", "float32", None, (2 << 20) + 5, None)
    yield ("irecv_before_isend", "uint8", None, 1003, None)


def _check_ranks(rank, world, store_url):
    import torch
    import torch.distributed as dist
    import reccl_torch  # noqa: F401  (registers the backend)

    dist.init_process_group("gloo", init_method=store_url, rank=rank, world_size=world)
    gloo = dist.group.WORLD
    reccl = dist.new_group(backend="reccl")
    assert type(reccl).__name__ == "ProcessGroupReccl", type(reccl)
    R = dist.ReduceOp

    def values(dtype, shape, salt):
        n = 1
        for s in shape:
            n *= s
        v = (torch.arange(n, dtype=torch.int64) * 7 + rank * 13 + salt) % 5
        dt = getattr(torch, dtype)
        if dtype == "bool":
            out = v % 2 == 1
        elif dtype == "complex64":
            out = torch.complex(v.float(), v.float() - 1)
        elif dtype == "int16":
            out = (v * 300 - 600).to(dt)
        elif dtype == "uint8":
            out = v.to(dt)
        else:
            out = (v - 2).to(dt)
        return out.reshape(shape)

    def avg_values(dtype, n, salt):
        # Ranks' values sum to world * base, so the average is exact in every dtype.
        base = 3 + (torch.arange(n, dtype=torch.int64) * 7 + salt) % 5
        return (base + (2 * rank - (world - 1))).to(getattr(torch, dtype))

    def gloo_call(fn, *tensors):
        """Runs a gloo call on tensors; a dtype gloo lacks runs on a lossless stand-in."""
        try:
            fn(*tensors)
            return
        except RuntimeError as e:
            if "Invalid scalar type" not in str(e):
                raise
        # bfloat16 reductions: float32 (small integers are exact in both); otherwise the bytes,
        # keeping dim 0 so that split sizes in rows still apply.
        flat = [t for t in tensors if isinstance(t, torch.Tensor)]
        stand_in = [t.float() if t.dtype == torch.bfloat16 else t.reshape(t.shape[0], -1).view(torch.uint8)
                    for t in flat]
        fn(*stand_in)
        for t, s in zip(flat, stand_in):
            if t.dtype == torch.bfloat16:
                t.copy_(s.to(torch.bfloat16))

    # PREMUL_SUM: each rank's own factor (whole, so every product is exact in every dtype); as a
    # tensor on odd ranks, a number on even ones (the two forms _make_nccl_premul_sum takes).
    factor = rank + 2

    def reduce_op(op, dtype=None):
        if op == "PREMUL_SUM":
            if rank % 2 and dtype is not None:
                return dist._make_nccl_premul_sum([torch.tensor([factor], dtype=getattr(torch, dtype))])
            return dist._make_nccl_premul_sum(float(factor))
        return getattr(R, op)

    def gloo_allreduce(t, op):
        if op == "PREMUL_SUM":  # gloo has none: this rank's input times its factor, summed
            t.mul_(factor)
            gloo_call(lambda x: dist.all_reduce(x, op=R.SUM, group=gloo), t)
        elif op == "AVG":
            gloo_call(lambda x: dist.all_reduce(x, op=R.SUM, group=gloo), t)
            if t.is_floating_point():
                t.div_(world)
            else:
                t.copy_(torch.div(t, world, rounding_mode="trunc"))
        else:
            gloo_call(lambda x: dist.all_reduce(x, op=reduce_op(op), group=gloo), t)

    def inputs_for(op, dtype, n, salt):
        return avg_values(dtype, n, salt) if op == "AVG" else values(dtype, (n,), salt)

    def run(coll, dtype, op, n, extra):
        """(reference, under test) outputs of one case."""
        if coll == "all_reduce":
            a = inputs_for(op, dtype, n, 1)
            b = a.clone()
            gloo_allreduce(a, op)
            dist.all_reduce(b, op=reduce_op(op, dtype), group=reccl)
            return a, b
        if coll == "all_reduce_coalesced":
            a = [values(dtype, (m,), s) for s, m in enumerate((5, n))]
            b = [t.clone() for t in a]
            dist.all_reduce_coalesced(a, op=reduce_op(op), group=gloo)
            dist.all_reduce_coalesced(b, op=reduce_op(op), group=reccl)
            return torch.cat(a), torch.cat(b)
        if coll == "reduce":
            a = inputs_for(op, dtype, n, 2)
            b = a.clone()
            gloo_allreduce(a, op)  # the root's result; gloo's reduce has no AVG
            dist.reduce(b, extra, op=reduce_op(op, dtype), group=reccl)
            return (a, b) if rank == extra else (None, None)
        if coll in ("reduce_scatter", "reduce_scatter_tensor"):
            full = torch.cat([inputs_for(op, dtype, n, 3 + p) for p in range(world)])
            ref = full.clone()
            gloo_allreduce(ref, op)
            ref = ref[rank * n:(rank + 1) * n]
            out = torch.empty(n, dtype=full.dtype)
            if coll == "reduce_scatter":
                dist.reduce_scatter(out, list(full.split(n)), op=reduce_op(op, dtype), group=reccl)
            else:
                dist.reduce_scatter_tensor(out, full, op=reduce_op(op, dtype), group=reccl)
            return ref, out
        if coll == "broadcast":
            a = values(dtype, (n,), 4)
            b = a.clone()
            gloo_call(lambda x: dist.broadcast(x, extra, group=gloo), a)
            dist.broadcast(b, extra, group=reccl)
            return a, b
        if coll in ("all_gather", "all_gather_into_tensor"):
            x = values(dtype, (n,), 5)
            ref = [torch.empty_like(x) for _ in range(world)]
            gloo_call(lambda *t: dist.all_gather(list(t[1:]), t[0], group=gloo), x, *ref)
            if coll == "all_gather":
                out = [torch.empty_like(x) for _ in range(world)]
                dist.all_gather(out, x, group=reccl)
                return torch.cat(ref), torch.cat(out)
            out = torch.empty(world * n, dtype=x.dtype)
            dist.all_gather_into_tensor(out, x, group=reccl)
            return torch.cat(ref), out
        if coll == "all_to_all_single":
            if extra == "even":
                x = values(dtype, (world * n, 2), 6)
                ins = outs = None
            else:
                # Rank r sends 1 + (r + p) % 3 rows to p; p sends as many back.
                ins = [1 + (rank + p) % 3 for p in range(world)]
                outs = [1 + (p + rank) % 3 for p in range(world)]
                x = values(dtype, (sum(ins), n), 6)
            rows = x.shape[0] if outs is None else sum(outs)
            ref = torch.empty((rows, x.shape[1]), dtype=x.dtype)
            out = torch.empty_like(ref)
            gloo_call(lambda o, i: dist.all_to_all_single(o, i, outs, ins, group=gloo), ref, x)
            dist.all_to_all_single(out, x, outs, ins, group=reccl)
            return ref, out
        if coll == "all_to_all":
            # Rank r sends n + r + p elements to p (different sizes per pair).
            ins = [values(dtype, (n + rank + p,), 7 + p) for p in range(world)]
            sizes = [n + p + rank for p in range(world)]
            ref = torch.empty(sum(sizes), dtype=ins[0].dtype)
            gloo_call(lambda o, i: dist.all_to_all_single(o, i, sizes, [t.numel() for t in ins], group=gloo), ref,
                      torch.cat(ins))
            outs = [torch.empty(s, dtype=ins[0].dtype) for s in sizes]
            dist.all_to_all(outs, ins, group=reccl)
            return ref, torch.cat(outs)
        if coll == "gather":
            x = values(dtype, (n,), 8)
            ref = [torch.empty_like(x) for _ in range(world)] if rank == extra else []
            out = [torch.empty_like(x) for _ in range(world)] if rank == extra else None
            gloo_call(lambda *t: dist.gather(t[0], list(t[1:]) if rank == extra else None, dst=extra, group=gloo),
                      x, *ref)
            dist.gather(x, out, dst=extra, group=reccl)
            return (torch.cat(ref), torch.cat(out)) if rank == extra else (None, None)
        if coll == "scatter":
            parts = [values(dtype, (n,), 9 + p) for p in range(world)] if rank == extra else []
            ref = torch.empty_like(values(dtype, (n,), 0))
            out = torch.empty_like(ref)
            gloo_call(lambda *t: dist.scatter(t[0], list(t[1:]) if rank == extra else None, src=extra, group=gloo),
                      ref, *parts)
            dist.scatter(out, parts if rank == extra else None, src=extra, group=reccl)
            return ref, out
        if coll == "send_recv_ring":
            x = values(dtype, (n,), 10)
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            ref, out = torch.empty_like(x), torch.empty_like(x)

            def ring(group, o, i):
                reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, i, nxt, group),
                                               dist.P2POp(dist.irecv, o, prv, group)])
                for r in reqs:
                    r.wait()
            gloo_call(lambda o, i: ring(gloo, o, i), ref, x)
            ring(reccl, out, x)
            return ref, out
        if coll == "send_recv_in_order":
            # Rank 0 sends one message to every other rank in turn; blocking calls.
            got = []
            for group in (gloo, reccl):
                if rank == 0:
                    for p in range(1, world):
                        dist.send(values(dtype, (n,), 11 + p), p, group=group)
                    got.append(torch.zeros(1, dtype=torch.int64))
                else:
                    t = torch.empty(n, dtype=getattr(torch, dtype))
                    dist.recv(t, 0, group=group)
                    got.append(t)
            return got[0], got[1]
        if coll in ("isend_before_irecv", "irecv_before_isend"):
            peers = [p for p in range(world) if p != rank]
            outs = []
            for group in (gloo, reccl):
                got = {p: [torch.empty(n, dtype=getattr(torch, dtype)) for _ in range(2)] for p in peers}
                sends = [(values(dtype, (n,), 12 + 2 * p + k), p) for p in peers for k in range(2)]
                recvs = [(got[p][k], p) for p in reversed(peers) for k in range(2)]
                first, then = (sends, recvs) if coll == "isend_before_irecv" else (recvs, sends)
                fns = (dist.isend, dist.irecv) if coll == "isend_before_irecv" else (dist.irecv, dist.isend)
                reqs = [fns[0](t, p, group=group) for t, p in first] + [fns[1](t, p, group=group) for t, p in then]
                for r in reqs:
                    r.wait()
                outs.append(torch.cat([t for p in peers for t in got[p]]))
            return outs[0], outs[1]
        raise AssertionError(f"unknown case {coll}")

    def same_bits(a, b):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
            a.contiguous().view(torch.uint8) if a.dtype != torch.bool else a,
            b.contiguous().view(torch.uint8) if b.dtype != torch.bool else b)

    checked, failures = 0, []
    for case in _cases(world):
        ref, got = run(*case)
        if ref is None:
            continue
        checked += 1
        if not same_bits(ref, got):
            diff = (ref != got).nonzero()
            where = diff[0].tolist() if diff.numel() else "shape/dtype"
            failures.append(f"{case}: first difference at {where}: gloo {ref.flatten()[:8].tolist()} "
                            f"reccl {got.flatten()[:8].tolist()}")

    # Asynchronous: several operations in flight, completed in order; futures carry the outputs.
    xs = [values("float32", (1003,), 20 + i) for i in range(4)]
    refs = [x.clone() for x in xs]
    for r in refs:
        dist.all_reduce(r, group=gloo)
    works = [dist.all_reduce(x, group=reccl, async_op=True) for x in xs]
    futs = [w.get_future() for w in works]
    for w, f, x, r in zip(works, futs, xs, refs):
        w.wait()
        value = f.wait()
        if not (same_bits(x, r) and same_bits(value[0], r)):
            failures.append("async all_reduce: result or future value differs from gloo")
        checked += 1
    dist.barrier(group=reccl)
    dist.barrier(group=reccl, async_op=True).wait()

    stats = reccl_torch.stats(reccl)
    dist.destroy_process_group(reccl)
    dist.destroy_process_group()
    if failures:
        raise AssertionError(f"{len(failures)} of {checked} cases differ:\n" + "\n".join(failures[:20]))
    return {"checked": checked, "collectives": stats["collectives"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=2, help="ranks (processes on this host)")
    ap.add_argument("--tcp", action="store_true", help="TCP between the ranks (RECCL_SHM_DISABLE=1), not shared memory")
    ap.add_argument("--ranks-per-root", type=int, default=None,
                    help="RECCL_RANKS_PER_ROOT: the group's bootstrap over ceil(world / this) roots")
    args = ap.parse_args()
    require_backend()
    env = {"RECCL_SHM_DISABLE": "1"} if args.tcp else {}
    logs = None
    if args.ranks_per_root is not None:
        # Each rank's bootstrap log line says how many roots its group's communicator used.
        logs = tempfile.mkdtemp(prefix="reccl-torch-roots-")
        env.update({"RECCL_RANKS_PER_ROOT": str(args.ranks_per_root), "RECCL_DEBUG": "INFO",
                    "RECCL_DEBUG_SUBSYS": "BOOTSTRAP", "RECCL_DEBUG_FILE": os.path.join(logs, "rank.%p.log")})
    try:
        results = run_ranks(args.world, _check_ranks, env=env, timeout=600)
        if logs is not None:
            roots = -(-args.world // args.ranks_per_root) if args.ranks_per_root > 0 else 1
            text = "".join(open(os.path.join(logs, f)).read() for f in sorted(os.listdir(logs)))
            said = len(re.findall(rf"bootstrap over {roots} roots", text))
            if roots > 1:
                assert said >= args.world, f"{said} rank(s) bootstrapped over {roots} roots, expected {args.world}:\n{text}"
    finally:
        if logs is not None:
            shutil.rmtree(logs, ignore_errors=True)
    cases = list(_cases(args.world))
    rooted = sum(1 for c in cases if c[0] in ("reduce", "gather"))  # checked on the root only
    for rank, r in enumerate(results):
        want = len(cases) + 4 - (0 if rank == args.world - 1 else rooted)  # + 4 asynchronous
        assert r["checked"] == want, f"rank {rank} checked {r['checked']} cases, expected {want}"
        assert r["collectives"] > 0, (rank, r)
    roots = "" if args.ranks_per_root is None else f", {args.ranks_per_root} rank(s) per bootstrap root"
    print(f"ok: {args.world} ranks{' over tcp' if args.tcp else ''}{roots}, {results[0]['checked']} cases on rank 0 "
          f"equal to gloo bit for bit, {results[0]['collectives']} reccl calls")


if __name__ == "__main__":
    main()
