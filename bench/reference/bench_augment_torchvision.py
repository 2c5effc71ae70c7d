#!/usr/bin/python3
"""Reference timing of DINO's multi-crop augmentation with torchvision/PIL.

The pipeline is main_dino.py's DataAugmentationDINO, written out from the official code
(facebookresearch/dino: main_dino.py, utils.GaussianBlur, utils.Solarization): decode with PIL
(ImageFolder's loader: open, convert("RGB")), 2 global crops of 224 and 8 local crops of 96,
each normalised to a float tensor. Images per second are measured through a torch DataLoader
with N worker processes (what the official training does), and in-process with no workers.

Run by bench_augment (C++), which compares the numbers with ours side by side; it can also run
alone:
  /usr/bin/python3 bench/reference/bench_augment_torchvision.py --jpegs DIR --workers 1 2
  /usr/bin/python3 bench/reference/bench_augment_torchvision.py --make-jpegs DIR --count 48
Prints one JSON object per measurement on stdout.
"""
import argparse
import gc
import gzip
import json
import os
import random
import resource
import sys
import time

import numpy as np
import torch
from PIL import Image, ImageFilter, ImageOps
from torchvision import transforms

# Real photos installed on the 2-core CI machine; ImageNet-sized JPEGs are cut from them.
DEFAULT_SOURCES = [
    "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html/"
    "embedded-book/assets/f3.jpg",
    "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html/"
    "embedded-book/assets/verify.jpeg",
    "/usr/lib/google-cloud-sdk/platform/google_appengine/google/appengine/tools/java/jetty12/"
    "jetty-home/modules/demo.d/root/images/jetty-pic.png",
]


class GaussianBlur:
    """utils.GaussianBlur: applied if random() <= p, radius ~ U(0.1, 2)."""

    def __init__(self, p=0.5, radius_min=0.1, radius_max=2.0):
        self.prob, self.radius_min, self.radius_max = p, radius_min, radius_max

    def __call__(self, img):
        if random.random() > self.prob:
            return img
        radius = random.uniform(self.radius_min, self.radius_max)
        return img.filter(ImageFilter.GaussianBlur(radius=radius))


class Solarization:
    """utils.Solarization: applied if random() < p."""

    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        return ImageOps.solarize(img) if random.random() < self.p else img


class DataAugmentationDINO:
    def __init__(self, global_crops_scale=(0.4, 1.0), local_crops_scale=(0.05, 0.4),
                 local_crops_number=8):
        flip_and_color_jitter = transforms.Compose([
            transforms.RandomHorizontalFlip(p=0.5),
            transforms.RandomApply(
                [transforms.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)],
                p=0.8),
            transforms.RandomGrayscale(p=0.2),
        ])
        normalize = transforms.Compose([
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ])
        bicubic = transforms.InterpolationMode.BICUBIC
        self.global_transfo1 = transforms.Compose([
            transforms.RandomResizedCrop(224, scale=global_crops_scale, interpolation=bicubic),
            flip_and_color_jitter, GaussianBlur(1.0), normalize])
        self.global_transfo2 = transforms.Compose([
            transforms.RandomResizedCrop(224, scale=global_crops_scale, interpolation=bicubic),
            flip_and_color_jitter, GaussianBlur(0.1), Solarization(0.2), normalize])
        self.local_crops_number = local_crops_number
        self.local_transfo = transforms.Compose([
            transforms.RandomResizedCrop(96, scale=local_crops_scale, interpolation=bicubic),
            flip_and_color_jitter, GaussianBlur(p=0.5), normalize])

    def __call__(self, image):
        crops = [self.global_transfo1(image), self.global_transfo2(image)]
        for _ in range(self.local_crops_number):
            crops.append(self.local_transfo(image))
        return crops


class JpegFiles(torch.utils.data.Dataset):
    """ImageFolder's default loader over a list of files."""

    def __init__(self, paths, transform, length):
        self.paths, self.transform, self.length = paths, transform, length

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        with open(self.paths[index % len(self.paths)], "rb") as f:
            img = Image.open(f)
            img = img.convert("RGB")
        return self.transform(img)


class FashionMnist(torch.utils.data.Dataset):
    """28x28 grey images converted to RGB as PIL does."""

    def __init__(self, images, transform, length):
        self.images, self.transform, self.length = images, transform, length

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        img = Image.fromarray(self.images[index % len(self.images)], "L").convert("RGB")
        return self.transform(img)


def read_idx_images(path, limit):
    with gzip.open(path, "rb") as f:
        data = f.read()
    n, rows, cols = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    n = min(n, limit)
    return np.frombuffer(data, np.uint8, n * rows * cols, 16).reshape(n, rows, cols)


def make_jpegs(out_dir, count, sources, seed=0):
    """ImageNet-like JPEGs: random 4:3 or 3:4 cuts of real photos, resized to 500x375 or
    375x500, quality 90."""
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(seed)
    photos = [Image.open(p).convert("RGB") for p in sources if os.path.exists(p)]
    if not photos:
        sys.exit("no source photos found; pass --sources FILE...")
    for k in range(count):
        im = photos[k % len(photos)]
        landscape = rng.random() < 0.75
        w_out, h_out = (500, 375) if landscape else (375, 500)
        aspect = w_out / h_out
        h = rng.randint(int(0.5 * im.height), im.height)
        w = min(im.width, int(round(h * aspect)))
        h = min(h, int(round(w / aspect)))
        x, y = rng.randint(0, im.width - w), rng.randint(0, im.height - h)
        cut = im.crop((x, y, x + w, y + h)).resize((w_out, h_out), Image.BICUBIC)
        if rng.random() < 0.5:
            cut = cut.transpose(Image.FLIP_LEFT_RIGHT)
        cut.save(os.path.join(out_dir, f"img{k:03d}.jpg"), quality=90)


def measure(dataset, workers, batch_size, warmup_batches):
    """(wall, cpu) images per second through a DataLoader (workers >= 1) or a plain loop (0).
    cpu counts the CPU seconds of this process and of its finished workers, warm-up included
    for the workers (they are only reaped at the end), so it divides all images they made."""
    if workers == 0:
        for i in range(warmup_batches * batch_size):
            dataset[i]
        n = len(dataset)
        start, cpu0 = time.perf_counter(), time.process_time()
        for i in range(n):
            dataset[i]
        return n / (time.perf_counter() - start), n / (time.process_time() - cpu0)
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = time.process_time()
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=workers,
                                         shuffle=False, drop_last=True,
                                         persistent_workers=False, prefetch_factor=2)
    it = iter(loader)
    for _ in range(warmup_batches):
        next(it)
    start = time.perf_counter()
    seen = 0
    for batch in it:
        seen += batch[0].shape[0]
    wall = seen / (time.perf_counter() - start)
    del it, loader
    gc.collect()
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (time.process_time() - cpu0 + usage1.ru_utime - usage0.ru_utime +
           usage1.ru_stime - usage0.ru_stime)
    total = (seen // batch_size + warmup_batches) * batch_size
    return wall, total / cpu


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--make-jpegs", metavar="DIR", help="write --count JPEGs to DIR and exit")
    p.add_argument("--count", type=int, default=48)
    p.add_argument("--sources", nargs="+", default=DEFAULT_SOURCES)
    p.add_argument("--jpegs", metavar="DIR", help="folder of JPEGs to time")
    p.add_argument("--fashion-mnist", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--images", type=int, default=640, help="images timed per measurement")
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args()

    if args.make_jpegs:
        make_jpegs(args.make_jpegs, args.count, args.sources)
        return
    torch.set_num_threads(1)
    random.seed(0)
    torch.manual_seed(0)
    aug = DataAugmentationDINO()
    inputs = []
    if args.jpegs:
        paths = sorted(os.path.join(args.jpegs, f) for f in os.listdir(args.jpegs)
                       if f.lower().endswith((".jpg", ".jpeg")))
        inputs.append(("jpeg", JpegFiles(paths, aug, args.images)))
    if args.fashion_mnist:
        images = read_idx_images(os.path.join(args.fashion_mnist,
                                              "train-images-idx3-ubyte.gz"), 1000)
        inputs.append(("fashion-mnist", FashionMnist(images, aug, args.images)))
    warmup = 2
    for name, dataset in inputs:
        for workers in args.workers:
            wall, cpu = measure(dataset, workers, args.batch_size, warmup)
            print(json.dumps({"pipeline": "torchvision", "input": name, "workers": workers,
                              "images_per_s": round(wall, 2),
                              "images_per_cpu_s": round(cpu, 2)}), flush=True)


if __name__ == "__main__":
    main()
