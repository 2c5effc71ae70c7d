"""An ImageFolder of real photos at ImageNet's sizes, made from the photos scikit-image ships,
for timing a GPU user's run end to end (bench/platform/gpu_user_run.sh, issue 62).

  python make_photos.py OUT [--train 10000] [--val 1000] [--workers N] [--quality 90]

Writes OUT/train/<class>/<n>.jpg and OUT/val/<class>/<n>.jpg: 12 classes, one per source photo
(astronaut, coffee, chelsea, rocket, hubble_deep_field, immunohistochemistry, camera, coins,
brick, grass, gravel, colorwheel; the grey ones become RGB), images spread evenly over them.
Each image is a random crop of its photo (8% to 100% of the area, aspect 3/4 to 4/3, as
RandomResizedCrop draws them), flipped or not, resized with Pillow's bicubic filter to 500 x 375
or 375 x 500 (ImageNet's median is about 500 x 375), given a colour shift (a gain per channel in
[0.75, 1.25], a gamma in [0.8, 1.25]) and a little noise (sigma 2 of 255), then saved as JPEG at
--quality. Every image's random numbers come from its own seed (class, split, index), so the
folder is byte-identical whatever --workers is, on any machine with the same Pillow and numpy.
Prints one JSON line: the counts, the bytes written and the seconds it took.
Needs numpy, Pillow and scikit-image (Debian: python3-skimage; the GPU machine has them).
"""
import argparse
import json
import multiprocessing
import os
import time

import numpy as np
import skimage.data
from PIL import Image

SOURCES = ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field",
           "immunohistochemistry", "camera", "coins", "brick", "grass", "gravel", "colorwheel"]
_photos = {}


def photo(name):
    if name not in _photos:
        a = getattr(skimage.data, name)()
        if a.ndim == 2:
            a = np.stack([a] * 3, axis=-1)
        _photos[name] = Image.fromarray(np.ascontiguousarray(a[..., :3]))
    return _photos[name]


def make(job):
    out, split, cls, index, quality = job
    seed = [SOURCES.index(cls), 0 if split == "train" else 1, index]
    rng = np.random.default_rng(seed)
    src = photo(cls)
    width, height = src.size
    area = width * height
    for _ in range(10):  # RandomResizedCrop's draw, then its fallback: the whole photo
        target = area * rng.uniform(0.08, 1.0)
        aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        w = int(round(np.sqrt(target * aspect)))
        h = int(round(np.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            x0 = int(rng.integers(0, width - w + 1))
            y0 = int(rng.integers(0, height - h + 1))
            break
    else:
        x0, y0, w, h = 0, 0, width, height
    size = (500, 375) if rng.uniform() < 0.75 else (375, 500)
    img = src.crop((x0, y0, x0 + w, y0 + h)).resize(size, Image.BICUBIC)
    if rng.uniform() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    a = np.asarray(img, dtype=np.float32) / 255.0
    a = a ** rng.uniform(0.8, 1.25) * rng.uniform(0.75, 1.25, size=3)
    a = a * 255.0 + rng.normal(0.0, 2.0, size=a.shape)
    img = Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8))
    path = os.path.join(out, split, cls, f"{index:05d}.jpg")
    img.save(path, quality=quality)
    return os.path.getsize(path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--train", type=int, default=10000)
    p.add_argument("--val", type=int, default=1000)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--quality", type=int, default=90)
    a = p.parse_args()
    if a.train < len(SOURCES) or a.val < 0:
        p.error(f"--train must be at least {len(SOURCES)} (one image per class), --val >= 0")
    start = time.time()
    jobs = []
    for split, count in (("train", a.train), ("val", a.val)):
        for i in range(count):
            cls = SOURCES[i % len(SOURCES)]
            os.makedirs(os.path.join(a.out, split, cls), exist_ok=True)
            jobs.append((a.out, split, cls, i // len(SOURCES), a.quality))
    with multiprocessing.Pool(max(1, a.workers)) as pool:
        sizes = pool.map(make, jobs, chunksize=64)
    print(json.dumps({"out": a.out, "classes": len(SOURCES), "train": a.train, "val": a.val,
                      "bytes": int(sum(sizes)), "seconds": round(time.time() - start, 1)}))


if __name__ == "__main__":
    main()
