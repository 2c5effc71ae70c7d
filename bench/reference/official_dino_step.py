#!/usr/bin/python3
"""The official DINO training step in PyTorch: the timing reference for bench_train, and the
independent side of tests/ssl/test_dino_step_python.cpp.

Builds XCiT (written here from docs/architecture.md, with the same tensor operations as
facebookresearch/xcit's xcit.py), the DINO head, multi-crop wrapper, loss, AdamW parameter
groups, per-parameter clipping, last-layer cancelling, the schedules and the teacher EMA of
main_dino.py (docs/dino.md).

Timing: fp32 CPU steps on synthetic crops, after the last-layer freeze (every parameter is
updated), timed the way bench_train times ours.
  /usr/bin/python3 bench/reference/official_dino_step.py --arch xcit_nano_12_p16 --out_dim 65536 \
      --batch 8 --steps 5 --warmup 2 [--threads N]
prints one JSON object: seconds per step overall and per phase (data, forward, backward,
optimizer, ema), images per second.

Parity: --parity INIT OUT trains from the state in INIT (a .pth written by the C++ test:
"args", the student's initial state_dict "student", and "batches", the crops of every
iteration in order) with main_dino.py's recipe and saves to OUT the final "student" and
"teacher" state_dicts, the loss "center", and per iteration "loss", "lr", "wd", "momentum".
"""
import argparse
import copy
import json
import math
import time

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F

ARCHS = {  # C, depth, heads, eta, tokens_norm
    "xcit_nano_12": (128, 12, 4, 1.0, False),
    "xcit_tiny_12": (192, 12, 4, 1.0, True),
    "xcit_small_12": (384, 12, 8, 1.0, True),
    "xcit_medium_24": (512, 24, 8, 1e-5, True),
}


def trunc_normal(t, std=0.02, a=-2.0, b=2.0):
    with torch.no_grad():
        lo = (1.0 + math.erf(a / std / math.sqrt(2.0))) / 2.0
        hi = (1.0 + math.erf(b / std / math.sqrt(2.0))) / 2.0
        t.uniform_(2 * lo - 1, 2 * hi - 1).erfinv_().mul_(std * math.sqrt(2.0)).clamp_(a, b)
    return t


class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if self.p == 0.0 or not self.training:
            return x
        keep = 1 - self.p
        mask = (keep + torch.rand((x.shape[0],) + (1,) * (x.ndim - 1), dtype=x.dtype)).floor_()
        return x.div(keep) * mask


class Mlp(nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(c, hidden), nn.GELU(), nn.Linear(hidden, c)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class FourierPE(nn.Module):
    def __init__(self, c, hidden=32, temperature=10000):
        super().__init__()
        self.token_projection = nn.Conv2d(2 * hidden, c, kernel_size=1)
        self.hidden, self.temperature = hidden, temperature

    def forward(self, B, H, W):
        ones = torch.ones(B, H, W, device=self.token_projection.weight.device)
        y = ones.cumsum(1)
        x = ones.cumsum(2)
        y = y / (y[:, -1:, :] + 1e-6) * 2 * math.pi
        x = x / (x[:, :, -1:] + 1e-6) * 2 * math.pi
        dim_t = torch.arange(self.hidden, dtype=torch.float32)
        dim_t = self.temperature ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / self.hidden)
        px, py = x[..., None] / dim_t, y[..., None] / dim_t
        px = torch.stack((px[..., 0::2].sin(), px[..., 1::2].cos()), dim=4).flatten(3)
        py = torch.stack((py[..., 0::2].sin(), py[..., 1::2].cos()), dim=4).flatten(3)
        return self.token_projection(torch.cat((py, px), dim=3).permute(0, 3, 1, 2))


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
                         nn.BatchNorm2d(cout))


class PatchEmbed(nn.Module):
    def __init__(self, c, patch):
        super().__init__()
        widths = [3, c // 8, c // 4, c // 2, c] if patch == 16 else [3, c // 4, c // 2, c]
        layers = []
        for i in range(len(widths) - 1):
            if i:
                layers.append(nn.GELU())
            layers.append(conv_bn(widths[i], widths[i + 1]))
        self.proj = nn.Sequential(*layers)

    def forward(self, x):
        x = self.proj(x)
        return x.flatten(2).transpose(1, 2), x.shape[2], x.shape[3]


class XCA(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.temperature = nn.Parameter(torch.ones(h, 1, 1))
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        q, k, v = q.transpose(-2, -1), k.transpose(-2, -1), v.transpose(-2, -1)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        attn = ((q @ k.transpose(-2, -1)) * self.temperature).softmax(dim=-1)
        return self.proj((attn @ v).permute(0, 3, 1, 2).reshape(B, N, C))


class LPI(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.act, self.bn = nn.GELU(), nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, groups=c)

    def forward(self, x, H, W):
        B, N, C = x.shape
        x = x.permute(0, 2, 1).reshape(B, C, H, W)
        x = self.conv2(self.bn(self.act(self.conv1(x))))
        return x.reshape(B, C, N).permute(0, 2, 1)


class XCABlock(nn.Module):
    def __init__(self, c, h, eta, dp):
        super().__init__()
        ln = lambda: nn.LayerNorm(c, eps=1e-6)  # noqa: E731
        self.norm1, self.attn, self.norm2, self.mlp = ln(), XCA(c, h), ln(), Mlp(c, 4 * c)
        self.norm3, self.local_mp = ln(), LPI(c)
        self.drop_path = DropPath(dp)
        for g in ("gamma1", "gamma2", "gamma3"):
            setattr(self, g, nn.Parameter(eta * torch.ones(c)))

    def forward(self, x, H, W):
        x = x + self.drop_path(self.gamma1 * self.attn(self.norm1(x)))
        x = x + self.drop_path(self.gamma3 * self.local_mp(self.norm3(x), H, W))
        return x + self.drop_path(self.gamma2 * self.mlp(self.norm2(x)))


class ClassAttention(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h, self.scale = h, (c // h) ** -0.5
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        a = ((q[:, :, 0:1] * k).sum(dim=-1) * self.scale).softmax(dim=-1)
        cls = self.proj((a.unsqueeze(2) @ v).transpose(1, 2).reshape(B, 1, C))
        return torch.cat([cls, x[:, 1:]], dim=1)


class ClassAttentionBlock(nn.Module):
    def __init__(self, c, h, eta, tokens_norm):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(c, eps=1e-6), ClassAttention(c, h)
        self.norm2, self.mlp = nn.LayerNorm(c, eps=1e-6), Mlp(c, 4 * c)
        self.gamma1, self.gamma2 = nn.Parameter(eta * torch.ones(c)), nn.Parameter(eta * torch.ones(c))
        self.tokens_norm = tokens_norm

    def forward(self, x):
        x = x + self.gamma1 * self.attn(self.norm1(x))
        if self.tokens_norm:
            x = self.norm2(x)
        else:
            x = torch.cat([self.norm2(x[:, 0:1]), x[:, 1:]], dim=1)
        cls = self.gamma2 * self.mlp(x[:, 0:1])
        return x + torch.cat([cls, x[:, 1:]], dim=1)


class XCiT(nn.Module):
    def __init__(self, arch, drop_path_rate=0.0):
        super().__init__()
        name, patch = arch.rsplit("_p", 1)
        c, depth, h, eta, tokens_norm = ARCHS[name]
        self.embed_dim = c
        self.patch_embed = PatchEmbed(c, int(patch))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c))
        self.blocks = nn.ModuleList([XCABlock(c, h, eta, drop_path_rate) for _ in range(depth)])
        self.cls_attn_blocks = nn.ModuleList(
            [ClassAttentionBlock(c, h, eta, tokens_norm) for _ in range(2)])
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.pos_embeder = FourierPE(c)
        trunc_normal(self.cls_token)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                trunc_normal(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        B = x.shape[0]
        x, H, W = self.patch_embed(x)
        x = x + self.pos_embeder(B, H, W).reshape(B, -1, x.shape[1]).permute(0, 2, 1)
        for blk in self.blocks:
            x = blk(x, H, W)
        x = torch.cat((self.cls_token.expand(B, -1, -1), x), dim=1)
        for blk in self.cls_attn_blocks:
            x = blk(x)
        return self.norm(x)[:, 0]


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim, norm_last_layer=True, hidden=2048, bottleneck=256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden),
                                 nn.GELU(), nn.Linear(hidden, bottleneck))
        for m in self.mlp:
            if isinstance(m, nn.Linear):
                trunc_normal(m.weight)
                nn.init.zeros_(m.bias)
        self.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck, out_dim, bias=False))
        self.last_layer.weight_g.data.fill_(1)
        if norm_last_layer:
            self.last_layer.weight_g.requires_grad = False

    def forward(self, x):
        return self.last_layer(F.normalize(self.mlp(x), dim=-1, p=2))


class MultiCrop(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, x):
        widths = torch.tensor([inp.shape[-1] for inp in x])
        ends = torch.cumsum(torch.unique_consecutive(widths, return_counts=True)[1], 0)
        start, out = 0, []
        for end in ends:
            out.append(self.backbone(torch.cat(x[start:end])))
            start = end
        return self.head(torch.cat(out))


class DINOLoss(nn.Module):
    def __init__(self, out_dim, ncrops, temp=0.04):
        super().__init__()
        self.ncrops, self.temp = ncrops, temp
        self.register_buffer("center", torch.zeros(1, out_dim))

    def forward(self, s, t, temp=None):
        s = (s / 0.1).chunk(self.ncrops)
        temp = self.temp if temp is None else temp
        p = F.softmax((t - self.center) / temp, dim=-1).detach().chunk(2)
        total, n = 0, 0
        for iq, q in enumerate(p):
            for v in range(len(s)):
                if v != iq:
                    total += torch.sum(-q * F.log_softmax(s[v], dim=-1), dim=-1).mean()
                    n += 1
        with torch.no_grad():
            bc = torch.sum(t, dim=0, keepdim=True) / len(t)
            self.center = self.center * 0.9 + bc * 0.1
        return total / n


def param_groups(model):
    reg, noreg = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (noreg if name.endswith(".bias") or len(p.shape) == 1 else reg).append(p)
    return [{"params": reg}, {"params": noreg, "weight_decay": 0.0}]


def cosine_scheduler(base, final, epochs, niter, warmup_epochs=0, start_warmup_value=0.0):
    """main_dino.py's schedule: a linear warm-up over warmup_epochs, then a half cosine from
    base to final, one value per iteration."""
    warmup = np.linspace(start_warmup_value, base, warmup_epochs * niter) if warmup_epochs else []
    iters = np.arange(epochs * niter - warmup_epochs * niter)
    cosine = final + 0.5 * (base - final) * (1 + np.cos(np.pi * iters / len(iters)))
    return np.concatenate((warmup, cosine))


def dino_iteration(student, teacher, loss_fn, opt, crops, lr, wd, momentum, teacher_temp,
                   epoch, clip_grad=3.0, freeze_last_layer=1, clock=None):
    """One iteration of train_one_epoch; returns the loss. `clock` (a list) receives the times
    after the schedules, the forwards + loss, backward, optimizer and EMA."""
    tick = (lambda: clock.append(time.perf_counter())) if clock is not None else (lambda: None)
    for g_i, g in enumerate(opt.param_groups):
        g["lr"] = lr
        if g_i == 0:
            g["weight_decay"] = wd
    tick()
    t_out = teacher(crops[:2])
    s_out = student(crops)
    loss = loss_fn(s_out, t_out, teacher_temp)
    if not math.isfinite(loss.item()):
        raise SystemExit("non-finite loss")
    tick()
    opt.zero_grad()
    loss.backward()
    tick()
    for p in student.parameters():  # utils.clip_gradients
        if p.grad is not None:
            norm = p.grad.data.norm(2)
            coef = clip_grad / (norm + 1e-6)
            if coef < 1:
                p.grad.data.mul_(coef)
    if epoch < freeze_last_layer:  # utils.cancel_gradients_last_layer
        for name, p in student.named_parameters():
            if "last_layer" in name:
                p.grad = None
    opt.step()
    tick()
    with torch.no_grad():
        for ps, pt in zip(student.parameters(), teacher.parameters()):
            pt.data.mul_(momentum).add_((1 - momentum) * ps.detach().data)
    tick()
    return loss.item()


def build(arch, out_dim, drop_path_rate=0.0, norm_last_layer=True, hidden=2048, bottleneck=256):
    student_backbone = XCiT(arch, drop_path_rate)
    head = lambda: DINOHead(student_backbone.embed_dim, out_dim, norm_last_layer, hidden,  # noqa: E731
                            bottleneck)
    student = MultiCrop(student_backbone, head())
    teacher = MultiCrop(XCiT(arch), head())
    teacher.load_state_dict(student.state_dict())
    for p in teacher.parameters():
        p.requires_grad = False
    student.train()
    teacher.train()
    return student, teacher


def parity(init_path, out_path):
    init = torch.load(init_path)
    a = init["args"]
    batches = init["batches"]
    epochs = a["epochs"]
    niter = len(batches) // epochs
    student, teacher = build(a["arch"], a["out_dim"], 0.0, a["norm_last_layer"], a["hidden_dim"],
                             a["bottleneck_dim"])
    student.load_state_dict(init["student"])
    teacher.load_state_dict(init["student"])
    loss_fn = DINOLoss(a["out_dim"], 2 + a["local_crops_number"])
    opt = torch.optim.AdamW(param_groups(student))
    world_batch = a["batch_size_per_gpu"]  # one process
    lr = cosine_scheduler(a["lr"] * world_batch / 256.0, a["min_lr"], epochs, niter,
                          a["warmup_epochs"])
    wd = cosine_scheduler(a["weight_decay"], a["weight_decay_end"], epochs, niter)
    momentum = cosine_scheduler(a["momentum_teacher"], 1.0, epochs, niter)
    wte = a["warmup_teacher_temp_epochs"]
    temps = np.concatenate((np.linspace(a["warmup_teacher_temp"], a["teacher_temp"], wte),
                            np.ones(epochs - wte) * a["teacher_temp"]))
    out = {"loss": [], "lr": [], "wd": [], "momentum": []}
    for it, crops in enumerate(batches):
        epoch = it // niter
        out["loss"].append(dino_iteration(student, teacher, loss_fn, opt, list(crops), lr[it],
                                          wd[it], momentum[it], temps[epoch], epoch,
                                          a["clip_grad"], a["freeze_last_layer"]))
        for k, v in (("lr", lr), ("wd", wd), ("momentum", momentum)):
            out[k].append(float(v[it]))
    out.update(student=student.state_dict(), teacher=teacher.state_dict(), center=loss_fn.center)
    torch.save(out, out_path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="xcit_nano_12_p16")
    ap.add_argument("--out_dim", type=int, default=65536)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--local_crops", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--parity", nargs=2, metavar=("INIT", "OUT"))
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.parity:
        parity(*args.parity)
        return
    torch.manual_seed(0)
    student, teacher = build(args.arch, args.out_dim, 0.1)
    loss_fn = DINOLoss(args.out_dim, 2 + args.local_crops)
    opt = torch.optim.AdamW(param_groups(student))
    B = args.batch
    phases = dict(data=0.0, forward=0.0, backward=0.0, optimizer=0.0, ema=0.0)
    total = 0.0
    for step in range(args.warmup + args.steps):
        clock = [time.perf_counter()]
        crops = [torch.randn(B, 3, 224, 224) for _ in range(2)]
        crops += [torch.randn(B, 3, 96, 96) for _ in range(args.local_crops)]
        dino_iteration(student, teacher, loss_fn, opt, crops, 5e-4 * B / 256, 0.04, 0.996, 0.04,
                       epoch=1 << 30, clock=clock)
        if step >= args.warmup:
            for k, t0, t1 in zip(phases, clock, clock[1:]):
                phases[k] += t1 - t0
            total += clock[-1] - clock[0]
    n = args.steps
    out = {"arch": args.arch, "out_dim": args.out_dim, "batch": B, "threads": torch.get_num_threads(),
           "sec_per_step": total / n, "images_per_sec": B * n / total,
           **{k + "_sec": v / n for k, v in phases.items()}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
