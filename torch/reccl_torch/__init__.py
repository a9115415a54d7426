"""reccl as a torch.distributed backend.

    import reccl_torch                      # registers the backend "reccl"
    torch.distributed.init_process_group("reccl")          # torchrun's environment (env://)
    group = torch.distributed.new_group(backend="reccl")   # or beside a gloo default group

CPU tensors. Every operation runs asynchronously on the process group's own thread, in the order
it was issued; errors are raised with reccl's message, and the process group's timeout bounds
each operation (Work.wait and reccl's collective deadline). See docs/torch.md.
"""

import torch.distributed as _dist

from ._C import ProcessGroupReccl

__all__ = ["ProcessGroupReccl", "stats", "fault_source"]

# Re-importing (importlib.reload, a second copy on sys.path) must not register twice: torch
# asserts on a duplicate name.
if "RECCL" not in _dist.Backend._plugins:
    _dist.Backend.register_backend("reccl", ProcessGroupReccl)


def _reccl_group(group):
    pg = _dist.distributed_c10d._get_default_group() if group is None else group
    if not isinstance(pg, ProcessGroupReccl):
        raise ValueError(f"reccl_torch: group: not a reccl process group ({type(pg).__name__})")
    return pg


def stats(group=None):
    """The reccl communicator's counters of a process group (default: the default group).

    A dict of recclCommStats_t's fields: collectives, bytesSent, bytesReceived, failovers,
    failbacks, bytesResent, duplicateSteps, railsUp, railsTotal, ...
    """
    return _reccl_group(group).stats()


def fault_source(group=None):
    """The link-fault source the group's communicator uses now ("bpf:...", "rtnetlink", ...)."""
    return _reccl_group(group).fault_source
