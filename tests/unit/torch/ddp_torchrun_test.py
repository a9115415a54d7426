"""examples/ddp_train.py under torchrun on this host, 2 processes: the reccl backend's per-step
losses equal the gloo backend's bit for bit. (With two ranks every allreduce adds the same two
numbers, whatever the algorithm, so the backends must agree exactly.)

    PYTHONPATH=build/torch /usr/bin/python3 tests/unit/torch/ddp_torchrun_test.py --example examples/ddp_train.py
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ranks import free_port, require_backend  # noqa: E402

PYTHON = "/usr/bin/python3"


def train(example, backend, out):
    # Debian's torchrun (torch 1.13 on Python 3.11) cannot parse its own default "--redirects 0
    # --tee 0"; "9:0" names no local rank, i.e. no redirection. --standalone's rendezvous would take
    # the fixed port 29400, which a test running beside this one may hold: a free port instead.
    cmd = [PYTHON, "-m", "torch.distributed.run", "--redirects", "9:0", "--tee", "9:0", "--nnodes", "1",
           "--rdzv_backend", "c10d", "--rdzv_endpoint", f"localhost:{free_port()}", "--rdzv_id", uuid.uuid4().hex,
           "--nproc_per_node", "2", example, "--backend", backend, "--steps", "12", "--width", "128",
           "--layers", "2", "--out", out, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
        raise SystemExit(f"FAILED: torchrun with --backend {backend} exited {r.returncode}")
    ranks = []
    for rank in range(2):
        with open(os.path.join(out, f"rank{rank}.json")) as f:
            ranks.append(json.load(f))
    return ranks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--example", required=True)
    args = ap.parse_args()
    require_backend()
    with tempfile.TemporaryDirectory(prefix="reccl-ddp-torchrun-") as work:
        reccl = train(args.example, "reccl", os.path.join(work, "reccl"))
        gloo = train(args.example, "gloo", os.path.join(work, "gloo"))
    for r in range(2):
        assert reccl[r]["losses"] == gloo[r]["losses"], (
            f"rank {r}: reccl losses {reccl[r]['losses']} differ from gloo's {gloo[r]['losses']}")
        assert reccl[r]["stats"]["collectives"] > 0, reccl[r]["stats"]
    print(f"ok: {len(reccl[0]['losses'])} steps, reccl's losses equal gloo's bit for bit on both ranks")


if __name__ == "__main__":
    main()
