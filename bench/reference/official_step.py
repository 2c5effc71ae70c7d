#!/usr/bin/python3
"""Times the official DINO training step: main_dino.py's own train_one_epoch, on models built by
facebookresearch/xcit's xcit.py and dino's vision_transformer.py/utils.py, the reference that
bench/reference/compare_train.py sets our bench_train against (bench/results/training_step_cpu.md,
and on a GPU bench/platform/gpu_check.sh: bench/results/gpu.md).

The official code is not part of this project: scripts/fetch_official.sh puts it in
bench/reference/official/ (git-ignored): dino, xcit and timm 0.4.9, the timm release xcit.py was
written for. Nothing here re-implements a piece of the step; what this file adds is the harness:
  - the model and optimiser set-up of main_dino.py's train_dino, for one process: the student
    is wrapped in DistributedDataParallel over a one-process Gloo group, as a one-GPU official
    run wraps it; without CUDA, xcit.py's SyncBatchNorm layers become BatchNorm2d (with one
    process they compute the same statistics, and PyTorch 1.13's DDP refuses SyncBatchNorm on
    the CPU);
  - on a machine without CUDA, Tensor.cuda() returns the tensor and torch.cuda.synchronize()
    does nothing (train_one_epoch calls both), and the end-of-epoch metric all-reduce, which
    builds CUDA tensors, is skipped: it runs once per epoch, outside the timed iterations;
  - xcit.py's ClassAttentionBlock with tokens_norm=False (the nano models) normalises the CLS
    token in place, `x[:, 0:1] = self.norm2(x[:, 0:1])`, which overwrites the input that
    LayerNorm's backward saved: in fp32 backward() fails ("modified by an inplace operation";
    fp16 autocast hides it, as LayerNorm then saves an fp32 copy). Here that norm2 normalises a
    copy of its (B, 1, C) input instead, the same arithmetic;
  - main_dino.py lists its --arch choices with torch.hub.list (online): the fetched xcit.py
    answers instead;
  - the small-image archs xcit_<size>_p4 of docs/architecture.md ("Small-image XCiT"), which
    xcit.py cannot build: its XCiT with patch_size 8 and a two-unit stem of its own conv3x3
    (3 -> C/2 -> C, stride 2 each), so the step can run at the main job's shapes.
Crops are random tensors made once, on the training device (data loading is bench_loader's
business); train_one_epoch runs `warmup` iterations, then `steps` timed ones, after the
last-layer freeze (epoch 1, freeze_last_layer 1: every parameter is updated).

On a GPU (--device cuda) the run is a one-GPU official run: NCCL group, SyncBatchNorm kept,
`cudnn.benchmark` on as main_dino.py sets it, and --precision
  - fp32: --use_fp16 false;
  - fp16: --use_fp16 true, i.e. main_dino.py's own autocast + torch.cuda.amp.GradScaler;
  - bf16: not an option of main_dino.py; here its autocast is made to cast to bfloat16 and its
    scaler is a disabled GradScaler (every call passes through), the smallest change that gives
    the official step in bf16.
The JSON then adds the peak allocated device memory, as bench_train's does.

usage: /usr/bin/python3 bench/reference/official_step.py --arch xcit_nano_12_p16 --out_dim 65536 \\
           --batch 8 [--global_size 224 --local_size 96 --locals 8 --head_hidden_dim 2048] \\
           [--steps 5 --warmup 2 --threads N] [--device cpu|cuda --precision fp32|fp16|bf16]
Prints one JSON object: seconds per step and images per second.
"""
import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OFFICIAL = os.path.join(HERE, "official")


def import_official():
    # dino first: its utils.py is the one main_dino.py imports (xcit has a utils.py of its own).
    paths = [os.path.join(OFFICIAL, p) for p in ("dino", "timm-0.4.9", "xcit")]
    missing = [p for p in paths if not os.path.isdir(p)]
    # A GPU machine without network has a newer timm installed, which still answers the three
    # imports xcit.py makes (with deprecation warnings); use it when 0.4.9 was not carried.
    if missing == [paths[1]] and importlib.util.find_spec("timm") is not None:
        paths, missing = [paths[0], paths[2]], []
    if missing:
        sys.exit(f"official_step.py: {missing[0]} is missing; run scripts/fetch_official.sh first")
    sys.path[:0] = paths
    import warnings
    warnings.filterwarnings("ignore")
    import main_dino  # noqa: E402
    import utils  # noqa: E402
    import vision_transformer as vits  # noqa: E402
    import xcit  # noqa: E402
    return main_dino, utils, vits, xcit


def build_backbone(xcit, arch, **kwargs):
    if arch in xcit.__dict__:
        return xcit.__dict__[arch](**kwargs)
    size, depth, patch = arch[len("xcit_"):].rsplit("_", 2)
    widths = {"nano": (128, 4, False), "tiny": (192, 4, True)}
    if patch != "p4" or size not in widths:
        sys.exit(f"official_step.py: unknown --arch {arch}")
    import torch.nn as nn
    from functools import partial
    dim, heads, tokens_norm = widths[size]
    model = xcit.XCiT(patch_size=8, embed_dim=dim, depth=int(depth), num_heads=heads,
                      mlp_ratio=4, qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6),
                      eta=1.0, tokens_norm=tokens_norm, **kwargs)
    model.patch_embed.proj = nn.Sequential(xcit.conv3x3(3, dim // 2, 2), nn.GELU(),
                                           xcit.conv3x3(dim // 2, dim, 2))
    return model


def clone_cls_norm_input(model):
    """For tokens_norm=False blocks: norm2 normalises a copy of its input (see the docstring)."""
    import torch.nn as nn

    class ClonedInputLayerNorm(nn.LayerNorm):
        def forward(self, x):
            return super().forward(x.clone())

    for blk in model.cls_attn_blocks:
        if not blk.tokens_norm:
            blk.norm2.__class__ = ClonedInputLayerNorm
    return model


def plain_batchnorm(module):
    """SyncBatchNorm -> BatchNorm2d with the same parameters and buffers, recursively."""
    import torch.nn as nn
    for name, child in module.named_children():
        if isinstance(child, nn.SyncBatchNorm):
            bn = nn.BatchNorm2d(child.num_features, child.eps, child.momentum, child.affine,
                                child.track_running_stats)
            bn.load_state_dict(child.state_dict())
            setattr(module, name, bn)
        else:
            plain_batchnorm(child)
    return module


def build_dino(main_dino, utils, vits, xcit, args, head_hidden_dim, cuda):
    """main_dino.py's train_dino set-up for one process: student (DDP) and teacher with their
    DINO heads, the teacher starting as the student, and the loss. On the CPU SyncBatchNorm
    becomes BatchNorm2d (see the docstring)."""
    import torch.nn as nn
    student = build_backbone(xcit, args.arch, drop_path_rate=args.drop_path_rate)
    teacher = build_backbone(xcit, args.arch)
    if not cuda:
        student, teacher = plain_batchnorm(student), plain_batchnorm(teacher)
    student, teacher = clone_cls_norm_input(student), clone_cls_norm_input(teacher)
    embed_dim = student.embed_dim
    student = utils.MultiCropWrapper(student, vits.DINOHead(
        embed_dim, args.out_dim, use_bn=args.use_bn_in_head,
        norm_last_layer=args.norm_last_layer, hidden_dim=head_hidden_dim))
    teacher = utils.MultiCropWrapper(teacher, vits.DINOHead(
        embed_dim, args.out_dim, args.use_bn_in_head, hidden_dim=head_hidden_dim))
    if cuda:
        student, teacher = student.cuda(), teacher.cuda()
    teacher_without_ddp = teacher
    student = nn.parallel.DistributedDataParallel(student)
    teacher_without_ddp.load_state_dict(student.module.state_dict())
    for p in teacher.parameters():
        p.requires_grad = False
    dino_loss = main_dino.DINOLoss(args.out_dim, args.local_crops_number + 2,
                                   args.warmup_teacher_temp, args.teacher_temp,
                                   args.warmup_teacher_temp_epochs, args.epochs)
    return student, teacher, teacher_without_ddp, dino_loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="xcit_nano_12_p16")
    ap.add_argument("--out_dim", type=int, default=65536)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--global_size", type=int, default=224)
    ap.add_argument("--local_size", type=int, default=96)
    ap.add_argument("--locals", type=int, default=8)
    ap.add_argument("--head_hidden_dim", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", choices=("fp32", "fp16", "bf16"), default="fp32")
    a = ap.parse_args()

    main_dino, utils, vits, xcit = import_official()
    import torch
    import torch.distributed as dist
    if a.threads:
        torch.set_num_threads(a.threads)
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("official_step.py: --device cuda, but torch sees no GPU")
    if a.precision != "fp32" and not cuda:
        sys.exit(f"official_step.py: --precision {a.precision} needs --device cuda")
    if not cuda:
        torch.Tensor.cuda = lambda self, *args, **kwargs: self
        torch.cuda.synchronize = lambda *args, **kwargs: None
        utils.SmoothedValue.synchronize_between_processes = lambda self: None
    # main_dino.py's --arch choices come from torch.hub.list of the xcit repository (online);
    # the fetched copy of that repository answers instead.
    torch.hub.list = lambda repo, *args, **kwargs: [
        n for n in vars(xcit) if n.startswith("xcit_")] + [a.arch]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    if cuda:
        torch.cuda.set_device(0)
        torch.backends.cudnn.benchmark = True  # as main_dino.py's init_distributed_mode leaves it

    args = main_dino.get_args_parser().parse_args([
        "--arch", a.arch, "--out_dim", str(a.out_dim), "--batch_size_per_gpu", str(a.batch),
        "--local_crops_number", str(a.locals), "--use_fp16", str(a.precision == "fp16").lower(),
        "--epochs", "2",
        "--warmup_epochs", "0"])
    torch.manual_seed(0)
    student, teacher, teacher_without_ddp, dino_loss = build_dino(
        main_dino, utils, vits, xcit, args, a.head_hidden_dim, cuda)
    optimizer = torch.optim.AdamW(utils.get_params_groups(student))
    n = a.warmup + a.steps
    lr_schedule = utils.cosine_scheduler(args.lr * a.batch / 256.0, args.min_lr, args.epochs, n,
                                         warmup_epochs=args.warmup_epochs)
    wd_schedule = utils.cosine_scheduler(args.weight_decay, args.weight_decay_end, args.epochs, n)
    momentum_schedule = utils.cosine_scheduler(args.momentum_teacher, 1, args.epochs, n)

    dev = torch.device(a.device)
    crops = [torch.randn(a.batch, 3, a.global_size, a.global_size, device=dev) for _ in range(2)]
    crops += [torch.randn(a.batch, 3, a.local_size, a.local_size, device=dev)
              for _ in range(a.locals)]
    fp16_scaler = None
    if a.precision == "fp16":
        fp16_scaler = torch.cuda.amp.GradScaler()  # what main_dino.py's train_dino makes
    elif a.precision == "bf16":
        fp16_scaler = torch.cuda.amp.GradScaler(enabled=False)
        torch.cuda.amp.autocast = lambda enabled=True, **kw: torch.autocast(
            "cuda", dtype=torch.bfloat16, enabled=enabled)
    if cuda:
        dino_loss = dino_loss.cuda()
        torch.cuda.reset_peak_memory_stats()
    labels = torch.zeros(a.batch, dtype=torch.long)

    class Timed(list):  # the data loader: the same crops every iteration, timed from warm-up end
        def __iter__(self):
            for i in range(len(self)):
                if i == a.warmup:
                    self.start = time.perf_counter()
                yield crops, labels

    loader = Timed([None] * n)
    with contextlib.redirect_stdout(io.StringIO()):  # MetricLogger's progress lines
        main_dino.train_one_epoch(student, teacher, teacher_without_ddp, dino_loss, loader,
                                  optimizer, lr_schedule, wd_schedule, momentum_schedule, 1,
                                  fp16_scaler, args)
    total = time.perf_counter() - loader.start
    out = {"impl": "official", "arch": a.arch, "out_dim": a.out_dim, "batch": a.batch,
           "device": a.device, "precision": a.precision, "threads": torch.get_num_threads(),
           "sec_per_step": total / a.steps, "images_per_sec": a.batch * a.steps / total}
    if cuda:
        out["peak_allocated_mib"] = torch.cuda.max_memory_allocated() // (1024 * 1024)
    print(json.dumps(out))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
