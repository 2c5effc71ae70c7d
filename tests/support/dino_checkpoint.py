#!/usr/bin/python3
"""Checks a DINO training checkpoint written by xcit-dino with PyTorch itself, or turns it into
the layout main_dino.py writes.

  check CKPT         torch.load it; check the official keys, rebuild the official DINO head
                     (nn.utils.weight_norm) and load the student's head weights strictly; rebuild
                     torch.optim.AdamW with DINO's two parameter groups and load the optimizer
                     state, then take a step; print OK.
  official IN OUT    rewrite IN as main_dino.py would have saved it: `args` as an
                     argparse.Namespace, optimizer steps as ints (torch 1.7), no xdino_resume.
Exit status 0 on success; an AssertionError or exception otherwise.
"""
import argparse
import sys

import torch
import torch.nn as nn


def check(path):
    ck = torch.load(path, map_location="cpu")
    keys = list(ck.keys())
    assert keys[:6] == ["student", "teacher", "optimizer", "epoch", "args", "dino_loss"], keys
    assert isinstance(ck["epoch"], int)
    assert isinstance(ck["args"], dict) and "arch" in ck["args"], ck["args"]
    student, teacher = ck["student"], ck["teacher"]
    assert all(k.startswith("module.") for k in student), list(student)[:3]
    assert set(student) == set(teacher)
    out_dim = ck["args"]["out_dim"]
    assert ck["dino_loss"]["center"].shape == (1, out_dim)

    # The official head, with weight-norm parameters weight_g [K,1] / weight_v [K,256].
    head_sd = {k[len("module.head."):]: v for k, v in student.items() if k.startswith("module.head.")}
    in_dim = head_sd["mlp.0.weight"].shape[1]
    hidden = head_sd["mlp.0.weight"].shape[0]
    bottleneck = head_sd["mlp.4.weight"].shape[0]
    head = nn.Module()
    head.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden),
                             nn.GELU(), nn.Linear(hidden, bottleneck))
    head.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck, out_dim, bias=False))
    head.load_state_dict(head_sd, strict=True)
    assert head.last_layer.weight_g.shape == (out_dim, 1)

    # torch.optim.AdamW over stand-in parameters shaped like DINO's two groups.
    opt_sd = ck["optimizer"]
    groups = opt_sd["param_groups"]
    assert len(groups) == 2 and groups[1]["weight_decay"] == 0.0
    for g in groups:
        for key in ("lr", "betas", "eps", "weight_decay", "amsgrad", "params"):
            assert key in g, (key, g.keys())
    shapes = {i: s["exp_avg"].shape for i, s in opt_sd["state"].items()}
    params = [[torch.zeros(shapes.get(i, (1,)), requires_grad=True) for i in g["params"]]
              for g in groups]
    opt = torch.optim.AdamW([{"params": params[0]}, {"params": params[1], "weight_decay": 0.0}])
    opt.load_state_dict(opt_sd)
    for group in params:
        for p in group:
            p.grad = torch.ones_like(p)
    opt.step()
    print("OK")


def official(src, dst):
    ck = torch.load(src, map_location="cpu")
    out = {}
    for key in ("student", "teacher", "optimizer", "epoch", "args", "dino_loss", "fp16_scaler"):
        if key in ck:
            out[key] = ck[key]
    out["args"] = argparse.Namespace(**ck["args"])
    for state in out["optimizer"]["state"].values():
        state["step"] = int(state["step"])
    torch.save(out, dst)
    print("OK")


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check(sys.argv[2])
    elif sys.argv[1] == "official":
        official(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
