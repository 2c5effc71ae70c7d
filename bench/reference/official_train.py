#!/usr/bin/python3
"""Trains with the official DINO code on the main job's data: main_dino.py's own
DataAugmentationDINO, schedules, DINOLoss and train_one_epoch, epoch after epoch, for the
side-by-side of bench/results/main_job.md, "Main job (issue 45)". Our `dino knn` then measures
the teacher it saves, so both trainers are judged by one k-NN (whose parity with eval_knn.py is
tested elsewhere).

The official code is not part of this project (scripts/fetch_official.sh,
bench/reference/official/). The harness is bench/reference/official_step.py's (its docstring says
what it changes and why: the one-process Gloo group, BatchNorm2d for SyncBatchNorm on the CPU, the
p4 stem, the cloned CLS norm input). What this file adds:
  - the data: Fashion-MNIST's IDX training file as PIL RGB images (what our IDX reader gives:
    grey replicated), the class-balanced subset of augment/data/dataset.h's balanced_subset
    (round-robin over the classes in file order), so both trainers see the same images;
  - the main job's small crops. DataAugmentationDINO hard-codes 224 and 96 pixel crops and a
    blur radius in (0.1, 2.0): here torchvision's RandomResizedCrop gets --global_size and
    --local_size in their place and utils.GaussianBlur the --blur_sigma range, nothing else;
  - flags that main_dino.py does not have: --max_samples, --head_hidden_dim, the crop sizes,
    --blur_sigma; every other flag is main_dino.py's own, parsed by its parser;
  - per epoch, checkpoint{epoch:04}.pth and checkpoint.pth with "student", "teacher" and
    "epoch", as main_dino.py writes them (no optimiser state: nothing resumes from them).

usage (the main job's recipe, configs/fashion_mnist.ini):
  PYTHONPATH=/tmp/timmsite build-cuda/venv/bin/python bench/reference/official_train.py \\
      --data_path /usr/share/datasets/fashion-mnist --max_samples 6000 \\
      --global_size 28 --local_size 12 --blur_sigma 0.02 0.3 --head_hidden_dim 1024 \\
      --arch xcit_nano_4_p4 --out_dim 1024 --epochs 6 --warmup_epochs 1 \\
      --batch_size_per_gpu 32 --lr 0.001 --min_lr 1e-6 --momentum_teacher 0.99 \\
      --local_crops_number 6 --local_crops_scale 0.1 0.4 --output_dir /tmp/official
then: build/dino knn --config configs/fashion_mnist.ini --arch xcit_nano_4_p4 \\
      --pretrained_weights /tmp/official/checkpoint.pth
"""
import argparse
import gzip
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import official_step  # noqa: E402  (the harness)


def read_idx_images(path):
    import numpy as np
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    n, h, w = (int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(3))
    return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(n, h, w)


def read_idx_labels(path):
    import numpy as np
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    return np.frombuffer(data, dtype=np.uint8, offset=8).astype(np.int64)


def balanced_subset(labels, max_samples):
    """augment/data/dataset.h's rule: round-robin over class ids, next unused sample each turn."""
    if max_samples <= 0 or max_samples >= len(labels):
        return list(range(len(labels)))
    per_class = {}
    for i, y in enumerate(labels):
        per_class.setdefault(int(y), []).append(i)
    classes, taken, cursor = sorted(per_class), [], {c: 0 for c in per_class}
    while len(taken) < max_samples:
        for c in classes:
            if len(taken) == max_samples:
                break
            if cursor[c] < len(per_class[c]):
                taken.append(per_class[c][cursor[c]])
                cursor[c] += 1
    return sorted(taken)


def find_file(folder, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    sys.exit(f"official_train.py: no {stem}[.gz] in {folder}")


def main():
    ours = argparse.ArgumentParser(add_help=False)
    ours.add_argument("--max_samples", type=int, default=0)
    ours.add_argument("--head_hidden_dim", type=int, default=2048)
    ours.add_argument("--global_size", type=int, default=224)
    ours.add_argument("--local_size", type=int, default=96)
    ours.add_argument("--blur_sigma", type=float, nargs=2, default=(0.1, 2.0))
    ours.add_argument("--threads", type=int, default=0)
    extra, rest = ours.parse_known_args()

    main_dino, utils, vits, xcit = official_step.import_official()
    import torch
    import torch.distributed as dist
    from PIL import Image
    from torchvision import transforms

    if extra.threads:
        torch.set_num_threads(extra.threads)
    # The harness's CPU stand-ins (official_step.py): .cuda() is the identity, no synchronise,
    # no end-of-epoch metric all-reduce of CUDA tensors.
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    torch.cuda.synchronize = lambda *args, **kwargs: None
    utils.SmoothedValue.synchronize_between_processes = lambda self: None
    # main_dino.py's --arch choices come from torch.hub.list (online): the fetched xcit.py and
    # the --arch asked for answer instead.
    arch = argparse.ArgumentParser(add_help=False)
    arch.add_argument("--arch", default="vit_small")
    asked = arch.parse_known_args(rest)[0].arch
    torch.hub.list = lambda repo, *a, **kw: [n for n in vars(xcit) if n.startswith("xcit_")] + [
        asked]
    args = main_dino.get_args_parser().parse_args(rest)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    utils.fix_random_seeds(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)

    # The crop sizes and blur range of the main job in DataAugmentationDINO's own pipeline.
    sizes = {224: extra.global_size, 96: extra.local_size}
    official_crop = transforms.RandomResizedCrop
    transforms.RandomResizedCrop = lambda size, *a, **kw: official_crop(sizes[size], *a, **kw)
    official_blur = utils.GaussianBlur
    utils.GaussianBlur = lambda p=0.5: official_blur(p, extra.blur_sigma[0], extra.blur_sigma[1])
    transform = main_dino.DataAugmentationDINO(args.global_crops_scale, args.local_crops_scale,
                                               args.local_crops_number)
    transforms.RandomResizedCrop, utils.GaussianBlur = official_crop, official_blur

    images = read_idx_images(find_file(args.data_path, "train-images-idx3-ubyte"))
    labels = read_idx_labels(find_file(args.data_path, "train-labels-idx1-ubyte"))
    keep = balanced_subset(labels, extra.max_samples)

    class FashionMnist(torch.utils.data.Dataset):
        def __len__(self):
            return len(keep)

        def __getitem__(self, i):
            image = Image.fromarray(images[keep[i]], mode="L").convert("RGB")
            return transform(image), int(labels[keep[i]])

    dataset = FashionMnist()
    sampler = torch.utils.data.DistributedSampler(dataset, shuffle=True)
    data_loader = torch.utils.data.DataLoader(dataset, sampler=sampler,
                                              batch_size=args.batch_size_per_gpu,
                                              num_workers=args.num_workers, drop_last=True)
    print(f"Data loaded: there are {len(dataset)} images.", flush=True)

    # main_dino.py's train_dino, for one CPU process (official_step.py's set-up).
    student, teacher, teacher_without_ddp, dino_loss = official_step.build_dino(
        main_dino, utils, vits, xcit, args, extra.head_hidden_dim, cuda=False)
    params_groups = utils.get_params_groups(student)
    optimizer = torch.optim.AdamW(params_groups)
    lr_schedule = utils.cosine_scheduler(
        args.lr * args.batch_size_per_gpu / 256.0, args.min_lr, args.epochs, len(data_loader),
        warmup_epochs=args.warmup_epochs)
    wd_schedule = utils.cosine_scheduler(args.weight_decay, args.weight_decay_end, args.epochs,
                                         len(data_loader))
    momentum_schedule = utils.cosine_scheduler(args.momentum_teacher, 1, args.epochs,
                                               len(data_loader))

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        start = time.time()
        stats = main_dino.train_one_epoch(student, teacher, teacher_without_ddp, dino_loss,
                                          data_loader, optimizer, lr_schedule, wd_schedule,
                                          momentum_schedule, epoch, None, args)
        seconds = time.time() - start
        state = {"student": student.state_dict(), "teacher": teacher.state_dict(),
                 "epoch": epoch + 1}
        torch.save(state, os.path.join(args.output_dir, f"checkpoint{epoch:04}.pth"))
        torch.save(state, os.path.join(args.output_dir, "checkpoint.pth"))
        print(f"epoch {epoch}: loss {stats['loss']:.4f}, {seconds:.0f} s, "
              f"{len(data_loader) * args.batch_size_per_gpu / seconds:.1f} images/s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
