#!/usr/bin/python3
"""Times the official evaluation code paths on the CPU, on the same data as `dino`: the
functions of a fetched checkout (bench/reference/official/dino, scripts/fetch_official.sh; never
part of this project) are imported and called as the scripts call them, on one process (a one-rank
gloo group for eval_copy_detection's extract_features; `.cuda()` made a no-op). The official side
of bench/scenarios/eval_suite.sh, which runs it alternated with ours.

  official_eval_suite.py copydays DATA --arch vit_small --patch_size 16 --imsize 320 --threads 2
  official_eval_suite.py davis DATA --arch vit_small --patch_size 16 --threads 2
  official_eval_suite.py revisited DATA --imsize 224 --multiscale 1 --threads 2
Prints one JSON line: images (or frames), seconds, per second.
Needs Debian's python3-torch, python3-torchvision, python3-opencv (davis), python3-pil.
"""
import argparse
import json
import os
import sys
import time
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "official", "dino"))
torch.Tensor.cuda = lambda self, *a, **k: self  # the scripts move everything to the GPU
sys.modules.setdefault("tqdm", types.SimpleNamespace(tqdm=lambda x: x))

import utils  # noqa: E402
import vision_transformer as vits  # noqa: E402


def model_of(args):
    model = vits.__dict__[args.arch](patch_size=args.patch_size, num_classes=0)
    model.eval()
    for p in model.parameters():
        p.requires_grad = False
    return model


def one_rank_group():
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=0, world_size=1)


def copydays(args):
    one_rank_group()
    import eval_copy_detection as ecd
    dataset = ecd.CopydaysDataset(args.data)
    model = model_of(args)
    a = types.SimpleNamespace(imsize=args.imsize, batch_size_per_gpu=16, num_workers=args.threads,
                              use_cuda=False)
    lists = [dataset.get_block(b) for b in dataset.query_blocks] + [dataset.get_block(0)]
    n = sum(len(l) for l in lists)
    start = time.perf_counter()
    for l in lists:
        ecd.extract_features(l, model, a)
    seconds = time.perf_counter() - start
    print(json.dumps({"what": "copydays features", "images": n, "seconds": seconds,
                      "per_second": n / seconds}))


def revisited(args):
    """eval_image_retrieval.py's loaders (thumbnail, batch 1) and eval_knn.extract_features,
    database then queries, as its main block runs them."""
    one_rank_group()
    import eval_image_retrieval as eir
    import eval_knn
    from torchvision import transforms as T
    transform = T.Compose([T.ToTensor(), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    model = model_of(args)
    n = 0
    start = time.perf_counter()
    for split in ("train", "query"):
        ds = eir.OxfordParisDataset(args.data, "roxford5k", split=split, transform=transform,
                                    imsize=args.imsize)
        loader = torch.utils.data.DataLoader(ds, batch_size=1, num_workers=args.threads,
                                             drop_last=False)
        eval_knn.extract_features(model, loader, use_cuda=False, multiscale=bool(args.multiscale))
        n += len(ds)
    seconds = time.perf_counter() - start
    print(json.dumps({"what": "revisited features" + (", multiscale" if args.multiscale else ""),
                      "images": n, "seconds": seconds, "per_second": n / seconds}))


def davis(args):
    import eval_video_segmentation as evs
    model = model_of(args)
    evs.args = types.SimpleNamespace(n_last_frames=7, size_mask_neighborhood=12, topk=5,
                                     patch_size=args.patch_size, output_dir=args.output)
    palette = np.zeros((256, 3), dtype=np.uint8)
    videos = [l.strip() for l in open(os.path.join(args.data, "ImageSets/2017/val.txt")) if l.strip()]
    frames = 0
    start = time.perf_counter()
    for v in videos:
        video_dir = os.path.join(args.data, "JPEGImages/480p/", v)
        frame_list = evs.read_frame_list(video_dir)
        seg_path = frame_list[0].replace("JPEGImages", "Annotations").replace("jpg", "png")
        first_seg, seg_ori = evs.read_seg(seg_path, args.patch_size)
        evs.eval_video_tracking_davis(evs.args, model, frame_list, video_dir, first_seg, seg_ori, palette)
        frames += len(frame_list)
    seconds = time.perf_counter() - start
    print(json.dumps({"what": "davis segmentation", "frames": frames, "seconds": seconds,
                      "per_second": frames / seconds}))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("task", choices=["copydays", "davis", "revisited"])
    p.add_argument("data")
    p.add_argument("--arch", default="vit_small")
    p.add_argument("--patch_size", type=int, default=16)
    p.add_argument("--imsize", type=int, default=320)
    p.add_argument("--multiscale", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--output", default="/tmp/official_davis_out")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    {"copydays": copydays, "davis": davis, "revisited": revisited}[args.task](args)
