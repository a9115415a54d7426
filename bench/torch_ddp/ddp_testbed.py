"""examples/ddp_train.py on a `reccl testbed`, for the DDP fault test and the DDP benchmark.

    with Testbed(reccl_cli, hosts=2, rails=2) as tb:
        run = tb.start_ddp(example, out_dir, ["--backend", "reccl", "--steps", "50"])
        run.wait_for_step(10)                  # rank 0 finished step 10
        plan = tb.start_plan([link_down(tb.host_netns(0), "rail0", at_ms=0, duration_ms=2000)], log)
        run.wait(timeout=300); plan.wait()
        ranks = read_ranks(out_dir, world=2)   # each rank's JSON (losses, step times, reccl counters)
        during, after = ends_around_fault(ranks[0]["step_end_ns"], log)

The testbed is removed when the block ends, and also when this process dies in any way: a guard
process holds a pipe from us and runs `reccl testbed down` when it closes. Needs root.
"""

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time

PYTHON = "/usr/bin/python3"  # Debian's python3-torch is for this interpreter


class Testbed:
    def __init__(self, reccl, hosts=2, rails=2, name=None, pythonpath=None):
        self.reccl = reccl
        self.hosts, self.rails = hosts, rails
        self.name = name or "tt" + _base36(os.getpid())
        self.env = dict(os.environ)
        if pythonpath:
            self.env["PYTHONPATH"] = pythonpath + os.pathsep + self.env.get("PYTHONPATH", "")
        self._guard = None

    def __enter__(self):
        # The guard starts before `up`, so a crash anywhere after leaves nothing behind.
        self._guard = subprocess.Popen(
            ["sh", "-c", f'cat >/dev/null; exec "$0" testbed down --name {self.name} >/dev/null 2>&1', self.reccl],
            stdin=subprocess.PIPE, start_new_session=True)
        subprocess.run([self.reccl, "testbed", "up", "--name", self.name, "--hosts", str(self.hosts),
                        "--rails", str(self.rails)], check=True, stdout=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc):
        subprocess.run([self.reccl, "testbed", "down", "--name", self.name], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        self._guard.stdin.close()
        self._guard.wait(timeout=30)

    def host_netns(self, host):
        return f"{self.name}-h{host}"

    def start_ranks(self, argv, env=None, ranks_per_host=1, timeout_s=None):
        """`reccl testbed run` of argv, one rank per host unless told; output followed line by line."""
        cmd = [self.reccl, "testbed", "run", "--name", self.name, "--ranks-per-host", str(ranks_per_host)]
        if timeout_s:
            cmd += ["--timeout", str(int(timeout_s))]
        return RankRun(cmd + ["--"] + argv, dict(self.env, **(env or {})))

    def start_ddp(self, example, out_dir, args, env=None, timeout_s=None):
        return self.start_ranks([PYTHON, example, "--out", out_dir] + args, env=env, timeout_s=timeout_s)

    def start_plan(self, actions, log_path):
        """`reccl inject plan` on a plan of `actions` (see link_down); its log goes to log_path."""
        plan_path = log_path + ".plan.json"
        with open(plan_path, "w") as f:
            json.dump({"version": 1, "actions": actions}, f)
        return subprocess.Popen([self.reccl, "inject", "plan", plan_path, "--log", log_path, "-q"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def link_down(netns, dev, at_ms, duration_ms=None, side="switch"):
    """A plan action: the cable of netns/dev pulled (at the switch by default) at at_ms."""
    a = {"at_ms": at_ms, "action": "link-down", "target": {"netns": netns, "dev": dev, "side": side}}
    if duration_ms:
        a["duration_ms"] = duration_ms
    return a


def plan_events(log_path):
    """(link-down realtime ns, link-up realtime ns or None) of the first link-down in a plan log."""
    down = up = None
    with open(log_path) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "action" and e.get("action") == "link-down" and e.get("ok"):
                if not e.get("undo") and down is None:
                    down = e["start_realtime_ns"]
                elif e.get("undo") and up is None:
                    up = e["start_realtime_ns"]
            if e.get("event") == "restore" and up is None and down is not None:
                up = e["start_realtime_ns"]
    return down, up


class RankRun:
    """A running `reccl testbed run`: its output kept, rank 0's "step N" lines watched."""
    STEP = re.compile(r"^\[rank 0\] step (\d+) ")

    def __init__(self, cmd, env):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.lines = []
        self._steps = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            m = self.STEP.match(line)
            if m:
                self._steps.put(int(m.group(1)))
        self._steps.put(None)

    def wait_for_step(self, step, timeout=300):
        """Blocks until rank 0 reports `step` (False if the run ended or the deadline passed first)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                s = self._steps.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if s is None:
                return False
            if s >= step:
                return True

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._reader.join(timeout=10)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)  # its own session: `reccl testbed run` forwards it to the ranks
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()

    def output(self):
        return "".join(self.lines)


def ends_around_fault(ends_ns, log_path):
    """(done while the plan's first link-down held, done after its link-up) of realtime stamps;
    (0, 0) when the log lacks either event."""
    down, up = plan_events(log_path)
    if down is None or up is None:
        return 0, 0
    return sum(1 for e in ends_ns if down < e < up), sum(1 for e in ends_ns if e > up)


def fail(msg, run=None):
    """A test's failure: the run's output tail (when given), the message, exit 1."""
    if run is not None:
        sys.stderr.write(run.output()[-6000:])
    print(f"FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def read_ranks(out_dir, world):
    ranks = []
    for r in range(world):
        with open(os.path.join(out_dir, f"rank{r}.json")) as f:
            ranks.append(json.load(f))
    return ranks


def _base36(n):
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    s = ""
    while True:
        n, d = divmod(n, 36)
        s = digits[d] + s
        if n == 0:
            return s


def require_root_and_torch(reccl):
    """Exits 77 (skipped) with the reason when this machine cannot run testbed DDP."""
    if os.geteuid() != 0:
        print("skipped: needs root (the testbed's network namespaces)", file=sys.stderr)
        sys.exit(77)
    if not os.access(reccl, os.X_OK):
        print(f"skipped: no reccl CLI at {reccl}", file=sys.stderr)
        sys.exit(77)
    probe = subprocess.run([PYTHON, "-c", "import torch.distributed, reccl_torch"], capture_output=True, text=True,
                           env=dict(os.environ))
    if probe.returncode != 0:
        print(f"skipped: {PYTHON} cannot import torch.distributed and reccl_torch: {probe.stderr.strip()[-300:]}",
              file=sys.stderr)
        sys.exit(77)
