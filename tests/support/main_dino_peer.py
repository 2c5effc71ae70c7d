#!/usr/bin/python3
"""Runs the official main_dino.py as a peer of `dino train`, on the CPU, for
tests/cli/peer/test_main_dino.sh.

  main_dino_peer.py OFFICIAL_DIR -- MAIN_DINO_FLAGS...

OFFICIAL_DIR is facebookresearch/dino as scripts/fetch_official.sh fetches it (never part of
this project). Its own train_dino() runs, with the flags as main_dino.py takes them; only what
ties it to a GPU and a network is replaced: .cuda() is the identity (and device='cuda' the
CPU in the tensors its meters make), the process group is
Gloo's (one process), DistributedDataParallel takes no device_ids, torch.hub.list (an argparse
choice list fetched from github.com) is empty. When --output_dir holds a checkpoint.pth,
train_dino resumes from it with its own utils.restart_from_checkpoint; this script then checks
what that load did, which main_dino.py itself does not (its load_state_dict is strict=False and
only prints what it missed):
  - the student, teacher and DINO loss loaded with no missing and no unexpected key;
  - the optimizer state sits on the right parameters: every AdamW state tensor (exp_avg,
    exp_avg_sq) has its parameter's shape, and every parameter but the frozen last layer's has
    a state.
On a failed check it exits 1 with the reason on the last line.
"""
import contextlib
import io
import os
import socket
import sys


def main():
    official = sys.argv[1]
    assert sys.argv[2] == "--", "usage: main_dino_peer.py OFFICIAL_DIR -- FLAGS..."
    flags = sys.argv[3:]
    sys.path.insert(0, official)

    import torch
    import torch.distributed as dist
    import torch.nn as nn

    torch.Tensor.cuda = lambda self, *a, **k: self
    nn.Module.cuda = lambda self, *a, **k: self
    torch.cuda.synchronize = lambda *a, **k: None
    torch.hub.list = lambda *a, **k: []
    make_tensor = torch.tensor  # utils.SmoothedValue sums its meters in device='cuda' tensors

    def cpu_tensor(*a, **k):
        if str(k.get("device", "")).startswith("cuda"):
            k["device"] = "cpu"
        return make_tensor(*a, **k)

    torch.tensor = cpu_tensor

    class CpuDDP(nn.parallel.DistributedDataParallel):
        def __init__(self, module, device_ids=None, **kwargs):
            super().__init__(module, **kwargs)

    nn.parallel.DistributedDataParallel = CpuDDP

    import utils  # official dino
    import main_dino

    def init_distributed_mode(args):
        with socket.socket() as s:  # a free loopback port for the one-process group
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        args.rank, args.world_size, args.gpu = 0, 1, 0
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=1,
                                rank=0)

    utils.init_distributed_mode = init_distributed_mode

    loaded = {}
    restart = utils.restart_from_checkpoint

    def checked_restart(path, run_variables=None, **kwargs):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            restart(path, run_variables=run_variables, **kwargs)
        sys.stdout.write(out.getvalue())
        if not os.path.isfile(path):
            return
        loaded["messages"] = out.getvalue()
        loaded["objects"] = kwargs

    utils.restart_from_checkpoint = checked_restart
    main_dino.utils = utils

    parser = main_dino.argparse.ArgumentParser("DINO", parents=[main_dino.get_args_parser()])
    args = parser.parse_args(flags)
    main_dino.Path(args.output_dir).mkdir(parents=True, exist_ok=True)

    # Check the load right after it, before training moves anything: train_dino calls
    # restart_from_checkpoint and then trains, so the check runs inside the first epoch's start.
    train_one_epoch = main_dino.train_one_epoch
    checked = []

    def check_then_train(*a, **k):
        if "objects" in loaded and not checked:
            check(loaded)
            checked.append(True)
        return train_one_epoch(*a, **k)

    main_dino.train_one_epoch = check_then_train
    main_dino.train_dino(args)
    if "objects" in loaded and not checked:
        check(loaded)
    print("main_dino_peer: OK")


def check(loaded):
    messages = loaded["messages"]
    for key in ("student", "teacher", "dino_loss"):
        line = [l for l in messages.splitlines() if f"=> loaded '{key}'" in l]
        if not line:
            fail(f"main_dino.py did not load '{key}' from the checkpoint: {messages!r}")
        if "missing_keys=[]" not in line[0] and "All keys matched" not in line[0]:
            fail(f"'{key}' loaded with keys missing: {line[0]}")
        if "unexpected_keys=[]" not in line[0] and "All keys matched" not in line[0]:
            fail(f"'{key}' loaded with unexpected keys: {line[0]}")
    optimizer = loaded["objects"]["optimizer"]
    if "=> loaded 'optimizer'" not in messages:
        fail(f"main_dino.py did not load the optimizer: {messages!r}")
    params = [p for g in optimizer.param_groups for p in g["params"]]
    names = {id(p): n for n, p in loaded["objects"]["student"].named_parameters()}
    with_state = 0
    for p in params:
        state = optimizer.state.get(p, {})
        if not state:
            # The last layer is frozen in the first epoch(s): no gradient, so AdamW has no
            # state for it yet, here as in main_dino.py's own checkpoints.
            if "last_layer" not in names.get(id(p), ""):
                fail(f"parameter {names.get(id(p), '?')} has no AdamW state")
            continue
        with_state += 1
        for name in ("exp_avg", "exp_avg_sq"):
            if name not in state:
                fail(f"an AdamW state without {name}")
            if tuple(state[name].shape) != tuple(p.shape):
                fail(f"an AdamW {name} of shape {tuple(state[name].shape)} sits on a parameter of "
                     f"shape {tuple(p.shape)}: the state is on the wrong parameter")
    if with_state == 0:
        fail("no parameter has an AdamW state")
    print(f"main_dino_peer: the checkpoint loaded whole; {with_state} AdamW states, each on a "
          "parameter of its shape")


def fail(why):
    print(f"main_dino_peer: FAIL: {why}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main()
