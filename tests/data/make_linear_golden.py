#!/usr/bin/python3
"""Golden values for tests/eval/test_linear.cpp, made with PyTorch (Debian's torch 1.13).

Writes linear_golden.json:
  - cosine_lr: the lr of each epoch under SGD + CosineAnnealingLR(T_max=epochs, eta_min=0)
    stepped once per epoch, as eval_linear.py does (base lr 0.004, 10 epochs);
  - sgd: a few epochs of eval_linear.py's training step (Linear, cross-entropy, SGD momentum
    0.9, cosine schedule) on fixed data, batches in order: initial and final weights;
  - sampler: DistributedSampler(shuffle=True, seed=0) indices for 10 samples, 3 replicas,
    epoch 2.
Run: /usr/bin/python3 tests/data/make_linear_golden.py  (from the repository root)
"""
import json
import os

import torch
from torch import nn

out = {}

# Cosine schedule as eval_linear.py steps it.
p = nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([p], lr=0.004, momentum=0.9, weight_decay=0)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 10, eta_min=0)
lrs = []
for epoch in range(10):
    lrs.append(opt.param_groups[0]["lr"])
    opt.step()
    sched.step()
out["cosine_lr"] = {"base": 0.004, "epochs": 10, "lr": lrs}

# Training steps of the linear classifier.
g = torch.Generator().manual_seed(0)
dim, labels, n, batch, epochs, lr = 6, 3, 12, 4, 3, 0.5
x = torch.randn(n, dim, generator=g)
y = torch.randint(labels, (n,), generator=g)
lin = nn.Linear(dim, labels)
with torch.no_grad():
    lin.weight.copy_(torch.randn(labels, dim, generator=g) * 0.01)
    lin.bias.zero_()
w0, b0 = lin.weight.detach().clone(), lin.bias.detach().clone()
scaled = lr * batch / 256.0
opt = torch.optim.SGD(lin.parameters(), scaled, momentum=0.9, weight_decay=0)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs, eta_min=0)
losses = []
for epoch in range(epochs):
    tot = []
    for i in range(0, n, batch):
        loss = nn.CrossEntropyLoss()(lin(x[i:i + batch]), y[i:i + batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
        tot.append(loss.item())
    losses.append(sum(tot) / len(tot))
    sched.step()
out["sgd"] = {
    "dim": dim, "labels": labels, "batch": batch, "epochs": epochs, "lr": lr,
    "x": x.flatten().tolist(), "y": y.tolist(),
    "w0": w0.flatten().tolist(), "b0": b0.tolist(),
    "w": lin.weight.detach().flatten().tolist(), "b": lin.bias.detach().tolist(),
    "train_loss": losses,
}

# DistributedSampler shards.
from torch.utils.data.distributed import DistributedSampler
shards = []
for rank in range(3):
    s = DistributedSampler(list(range(10)), num_replicas=3, rank=rank, shuffle=True, seed=0)
    s.set_epoch(2)
    shards.append(list(s))
out["sampler"] = {"n": 10, "world": 3, "epoch": 2, "seed": 0, "shards": shards}

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "linear_golden.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1)
print("wrote", path)
