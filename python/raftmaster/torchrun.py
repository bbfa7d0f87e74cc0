"""torchrun with the raftmaster rendezvous backend registered.

    python -m raftmaster.torchrun --nnodes 2 --nproc-per-node 1 \\
        --rdzv-backend raftmaster --rdzv-endpoint n1:8001,n2:8001,n3:8001 \\
        --rdzv-id job1 train.py [train.py's arguments]

It registers :mod:`raftmaster.torch_rendezvous` as ``raftmaster`` and runs
``torch.distributed.run`` (torchrun's main) with the arguments. torchrun's
options may be spelt with hyphens (``--nproc-per-node``) or underscores
(``--nproc_per_node``) whatever the PyTorch version; the training script's
own arguments are passed on untouched.

With PyTorch before 2.0 on Python 3.11 or later, torchrun itself cannot
start: its ``Std.from_str`` finds the value of ``--redirects`` and ``--tee``
by iterating over the ``Std`` flag, which from Python 3.11 on leaves out
``NONE`` and ``ALL``, so their defaults ("0") come out as None. The launcher
looks the values up by number instead when it finds that fault.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Dict, List, Optional


def torchrun_args(parser: argparse.ArgumentParser, argv: List[str]) -> List[str]:
    """argv with the spelling of each of torchrun's options that parser
    does not know (--nproc-per-node) replaced by the one it knows
    (--nproc_per_node), up to the training script, whose own arguments are
    left as they are."""
    options: Dict[str, argparse.Action] = {}
    for action in parser._actions:
        for s in action.option_strings:
            options[s] = action
    out: List[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            # The training script (or the end of the options): the rest is its.
            out.extend(argv[i:])
            break
        name, eq, value = arg.partition("=")
        attached = bool(eq)
        if name.startswith("--"):
            if name not in options:
                other = "--" + name[2:].replace("-", "_")
                if other not in options:
                    other = "--" + name[2:].replace("_", "-")
                if other in options:
                    name = other
        elif len(arg) > 2:
            # A short option with its value attached (-r3).
            name, eq, value, attached = arg, "", "", True
        out.append(name + eq + value)
        takes = options.get(name)
        if takes is not None and not attached and takes.nargs != 0 and i + 1 < len(argv):
            out.append(argv[i + 1])
            i += 1
        i += 1
    return out


def repair_std_from_str() -> bool:
    """Replace torch's ``Std.from_str`` by one that looks values up by
    number when it cannot read "0" (see the module's doc); report whether
    it did."""
    from torch.distributed.elastic.multiprocessing import api
    std = api.Std
    if std.from_str("0") is std.NONE and std.from_str("3") is std.ALL:
        return False
    value_re, mapping_re = api._VALUE_REGEX, api._MAPPING_REGEX

    def from_str(cls, vm: str):
        if re.match(value_re, vm):
            return cls(int(vm))
        if re.match(mapping_re, vm):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError(f"{vm} does not match: <{value_re}> or <{mapping_re}>")
    setattr(std, "from_str", classmethod(from_str))
    return True


def main(argv: Optional[List[str]] = None) -> None:
    """Register the backend and run torchrun with argv (sys.argv[1:] when None)."""
    try:
        from torch.distributed import run
    except ImportError:
        sys.exit("raftmaster.torchrun needs PyTorch: apt-get install python3-torch (Debian, Ubuntu) "
                 "or pip install torch")
    from . import torch_rendezvous
    torch_rendezvous.register()
    repair_std_from_str()
    args = sys.argv[1:] if argv is None else list(argv)
    run.main(torchrun_args(run.get_args_parser(), args))


if __name__ == "__main__":
    main()
