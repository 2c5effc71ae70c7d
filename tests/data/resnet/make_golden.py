#!/usr/bin/python3
"""Golden values for tests/models/test_resnet.cpp, made with Debian's python3-torchvision (0.14.1).

No weights are stored: every floating tensor of a model is filled from its position k in the
state_dict and the element index i by an integer hash both languages compute exactly,
  u = ((i * 2654435761 + (k + 1) * 40503) mod 2^32) / 2^32 - 0.5   (float64),
conv weights u * sqrt(24 / fan_in), BN running_var 1 + u / 2, BN weight 1 + u / 4, the other
vectors (BN bias, running_mean) u / 10, then cast to float32 (test_resnet.cpp: fill_weights).

Writes, next to this script:
  resnet_golden.pth  torch.save of a dict:
    images                 (2, 3, 64, 64) float32, seeded normal
    <arch>.eval            resnet18 / resnet50 / resnext50_32x4d features (fc = Identity) in
                           eval mode
    resnet18.train         resnet18 features in train mode (batch statistics)
    resnet18.running_mean  bn1.running_mean after that train-mode pass
    resnet18.running_var   layer4.1.bn2.running_var after it
    <arch>.keys            "key shape" per state_dict entry (fc removed), for resnet18/50,
                           wide_resnet50_2 and resnext50_32x4d
    <arch>.params / .params_fc / .num_keys / .flops224  for all ten archs: parameters
                           without and with fc, state_dict entries without fc, and fvcore-
                           convention FLOPs at 224 counted by forward hooks (conv weight
                           elements x output pixels, 2 per BN output, 1 per pooled input)
  dino_resnet50_backbone.pth         the official backbone-only layout: a plain state_dict
                                     of a torchvision ResNet-50 without fc
  dino_resnet50_full_checkpoint.pth  the official full checkpoint layout: student/teacher
                                     with module.backbone.* and module.head.* keys (main_dino.py
                                     wraps both in DDP for BatchNorm networks), optimizer,
                                     epoch, args (argparse.Namespace), dino_loss
  In both checkpoints entry k (state_dict order) holds the constant k + 1 expanded to the
  key's shape (stride 0, one stored float), so the files stay small and the test can tell
  every key from every other.
Run: /usr/bin/python3 tests/data/resnet/make_golden.py  (from the repository root)
"""
import argparse
import math
import os

import torch
import torchvision
from torch import nn

torch.set_num_threads(1)
here = os.path.dirname(os.path.abspath(__file__))
ARCHS = ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "wide_resnet50_2",
         "wide_resnet101_2", "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d"]


def backbone(arch):
    model = torchvision.models.__dict__[arch]()
    model.fc = nn.Identity()  # as main_dino.py / eval_linear.py do
    return model


def fill_weights(model):
    with torch.no_grad():
        for k, (name, t) in enumerate(model.state_dict().items()):
            if not t.is_floating_point():
                continue
            i = torch.arange(t.numel(), dtype=torch.int64)
            u = ((i * 2654435761 + (k + 1) * 40503) % (1 << 32)).double() / 2**32 - 0.5
            if t.dim() == 4:
                v = u * math.sqrt(24.0 / t[0].numel())
            elif name.endswith("running_var"):
                v = 1 + 0.5 * u
            elif name.endswith("weight"):
                v = 1 + 0.25 * u
            else:
                v = 0.1 * u
            t.copy_(v.view(t.shape).to(t.dtype))


def fvcore_flops(model, size):
    total = [0]

    def conv(m, inp, out):
        total[0] += out.numel() * m.weight[0].numel()

    def bn(m, inp, out):
        total[0] += 2 * out.numel()

    def pool(m, inp, out):
        total[0] += inp[0].numel()

    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            m.register_forward_hook(conv)
        elif isinstance(m, nn.BatchNorm2d):
            m.register_forward_hook(bn)
        elif isinstance(m, nn.AdaptiveAvgPool2d):
            m.register_forward_hook(pool)
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, size, size))
    return total[0]


def keys_text(model):
    return "\n".join(f"{k} {'x'.join(map(str, t.shape))}" for k, t in model.state_dict().items())


out = {}
g = torch.Generator().manual_seed(44)
images = torch.randn(2, 3, 64, 64, generator=g)
out["images"] = images

for arch in ARCHS:
    model = backbone(arch)
    out[f"{arch}.params"] = sum(p.numel() for p in model.parameters())
    out[f"{arch}.params_fc"] = sum(p.numel() for p in torchvision.models.__dict__[arch]().parameters())
    out[f"{arch}.num_keys"] = len(model.state_dict())
    out[f"{arch}.flops224"] = fvcore_flops(model, 224)
    if arch in ("resnet18", "resnet50", "wide_resnet50_2", "resnext50_32x4d"):
        out[f"{arch}.keys"] = keys_text(model)
    if arch in ("resnet18", "resnet50", "resnext50_32x4d"):
        fill_weights(model)
        model.eval()
        with torch.no_grad():
            out[f"{arch}.eval"] = model(images)
        if arch == "resnet18":
            model.train()
            with torch.no_grad():
                out[f"{arch}.train"] = model(images)
            out[f"{arch}.running_mean"] = model.bn1.running_mean.clone()
            out[f"{arch}.running_var"] = model.layer4[1].bn2.running_var.clone()
torch.save(out, os.path.join(here, "resnet_golden.pth"))


def constants(state, prefix="", start=0):
    """Entry k of `state` (from `start`) -> the constant k + 1 expanded to its shape."""
    res = {}
    for k, (name, t) in enumerate(state.items(), start):
        res[prefix + name] = torch.tensor(float(k + 1), dtype=t.dtype).expand(t.shape)
    return res


resnet50 = backbone("resnet50").state_dict()
torch.save(constants(resnet50), os.path.join(here, "dino_resnet50_backbone.pth"))

# DINOHead(2048, 65536) as main_dino.py builds it for resnet50 (no BN in the head).
head = {"mlp.0.weight": torch.empty(2048, 2048), "mlp.0.bias": torch.empty(2048),
        "mlp.2.weight": torch.empty(2048, 2048), "mlp.2.bias": torch.empty(2048),
        "mlp.4.weight": torch.empty(256, 2048), "mlp.4.bias": torch.empty(256),
        "last_layer.weight_g": torch.empty(65536, 1), "last_layer.weight_v": torch.empty(65536, 256)}
wrapped = constants(resnet50, "module.backbone.")
wrapped.update(constants(head, "module.head.", start=len(resnet50)))
args = argparse.Namespace(arch="resnet50", patch_size=16, out_dim=65536, optimizer="sgd", lr=0.03,
                          weight_decay=1e-4, weight_decay_end=1e-4, epochs=800)
torch.save({"student": wrapped, "teacher": wrapped,
            "optimizer": {"state": {}, "param_groups": [{"lr": 0.0, "momentum": 0.9,
                                                          "params": list(range(len(wrapped)))}]},
            "epoch": 800, "args": args, "dino_loss": {"center": torch.zeros(()).expand(1, 65536)}},
           os.path.join(here, "dino_resnet50_full_checkpoint.pth"))
