"""Small DAVIS-like and Copydays-like folders for the smoke runs of `dino video_segmentation`
and `dino copy_detection` in bench/platform/gpu_user_run.sh (issue 62), made from the same
scikit-image photos as make_photos.py (the ones its wheel ships: the GPU machine cannot
download). The tests' generators (tests/data/video/make_davis.py, tests/data/retrieval/
make_sets.py) read Debian's skimage folder and photos the wheel lacks, so they do not run there.

  python make_eval_sets.py davis OUT [--videos 2] [--frames 16]
  python make_eval_sets.py copydays OUT [--originals 12]

davis: OUT/ImageSets/2017/val.txt, OUT/JPEGImages/480p/<video>/NNNNN.jpg (854 x 480, JPEG q90),
OUT/Annotations/480p/<video>/NNNNN.png (palette PNGs in DAVIS's palette, 0 = background), for
every frame. Each video: a tinted background photo that the camera pans across, and one object
(even videos) or two (odd ones, the second passing over the first): an ellipse cut from another
photo, moving on a straight line from one random place to another over the video.
copydays: OUT/original/2NNN00.jpg (512 x 384 or 384 x 512, q95), OUT/strong/2NNNKK.jpg (two
heavy edits per original, named as Copydays: the first 4 characters are the original's),
OUT/jpegqual/<q>/ (the original at JPEG quality q), OUT/crops/<p>/ (the centre with p% of the
surface cut away), OUT/distractors/ (as many other crops) and OUT/whitening/ (twice as many).
Deterministic: each video's and original's random numbers come from its own seed. Prints one
JSON line: what was written and the seconds it took. Needs numpy, Pillow and scikit-image.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageOps

from make_photos import SOURCES, photo

# DAVIS's palette, from the tests' own DAVIS generator (which is safe to import: only its
# main reads Debian's scikit-image folder).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "data", "video"))
from make_davis import palette as davis_palette  # noqa: E402


def random_crop(rng, src, size):
    """A crop of `src` with the aspect of `size`, 40% to 100% of the largest, resized to it."""
    w, h = size
    fit = min(src.width / w, src.height / h)
    scale = fit * np.sqrt(rng.uniform(0.4, 1.0))
    cw, ch = max(1, int(w * scale)), max(1, int(h * scale))
    x = int(rng.integers(0, src.width - cw + 1))
    y = int(rng.integers(0, src.height - ch + 1))
    return src.crop((x, y, x + cw, y + ch)).resize(size, Image.BICUBIC)


def tint(img, gains):
    a = np.asarray(img, dtype=np.float32) * np.asarray(gains, dtype=np.float32)
    return Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8))


def video(out, index, frames, size=(854, 480)):
    rng = np.random.default_rng([62, 1, index])
    name = f"clip{index:02d}"
    w, h = size
    pan = (int(rng.integers(-6, 7)), int(rng.integers(-3, 4)))  # pixels per frame
    margin = (abs(pan[0]) * frames + 1, abs(pan[1]) * frames + 1)
    background = tint(random_crop(rng, photo(SOURCES[(7 + index) % len(SOURCES)]),
                                  (w + margin[0], h + margin[1])), rng.uniform(0.7, 1.2, size=3))
    objects = []
    for k in range(1 + index % 2):
        ow, oh = int(w * rng.uniform(0.18, 0.3)), int(h * rng.uniform(0.3, 0.45))
        texture = random_crop(rng, photo(SOURCES[(index + 3 * k) % 7]), (ow, oh))
        shape = Image.new("L", (ow, oh), 0)
        ImageDraw.Draw(shape).ellipse((0, 0, ow - 1, oh - 1), fill=255)
        a = rng.uniform([0, 0], [w - ow, h - oh])
        b = rng.uniform([0, 0], [w - ow, h - oh])
        objects.append((texture, shape, a, b))
    jpg = os.path.join(out, "JPEGImages", "480p", name)
    ann = os.path.join(out, "Annotations", "480p", name)
    os.makedirs(jpg, exist_ok=True)
    os.makedirs(ann, exist_ok=True)
    palette = davis_palette()
    for t in range(frames):
        x0 = pan[0] * t if pan[0] >= 0 else margin[0] - 1 + pan[0] * t
        y0 = pan[1] * t if pan[1] >= 0 else margin[1] - 1 + pan[1] * t
        frame = background.crop((x0, y0, x0 + w, y0 + h))
        labels = Image.new("L", size, 0)
        for label, (texture, shape, a, b) in enumerate(objects, start=1):
            s = t / max(1, frames - 1)
            x, y = (int(round(v)) for v in a + (b - a) * s)
            frame.paste(texture, (x, y), shape)
            labels.paste(label, (x, y, x + shape.width, y + shape.height), shape)
        frame.save(os.path.join(jpg, f"{t:05d}.jpg"), quality=90)
        # Indices kept as they are: a "P" image made from the bytes, DAVIS's palette on top.
        mask = Image.frombytes("P", size, labels.tobytes())
        mask.putpalette(palette)
        mask.save(os.path.join(ann, f"{t:05d}.png"))
    return name


def davis(a):
    os.makedirs(os.path.join(a.out, "ImageSets", "2017"), exist_ok=True)
    names = [video(a.out, v, a.frames) for v in range(a.videos)]
    with open(os.path.join(a.out, "ImageSets", "2017", "val.txt"), "w") as f:
        f.write("".join(n + "\n" for n in names))
    return {"videos": a.videos, "frames": a.frames, "size": "854x480"}


def strong_edit(img, k, rng):
    """Copydays' strong attacks are heavy manual edits; two of ours per original."""
    w, h = img.size
    if k == 0:  # mirrored, blurred, washed out
        out = ImageOps.mirror(img).filter(ImageFilter.GaussianBlur(3))
        return ImageEnhance.Color(out).enhance(0.3)
    # a crop resized back, harder contrast, a band painted across
    out = img.crop((w // 6, h // 8, w - w // 10, h - h // 6)).resize((w, h), Image.BILINEAR)
    a = np.asarray(ImageEnhance.Contrast(out).enhance(1.8)).copy()
    a[h // 2 - h // 20: h // 2 + h // 20] = rng.integers(0, 256, size=3, dtype=np.uint8)
    return Image.fromarray(a)


def save(img, path, quality=90):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    img.save(path, quality=quality)


def copydays(a):
    for i in range(a.originals):
        rng = np.random.default_rng([62, 2, i])
        size = (512, 384) if i % 3 else (384, 512)
        img = random_crop(rng, photo(SOURCES[i % len(SOURCES)]), size)
        name = f"{2000 + i:04d}00.jpg"
        save(img, os.path.join(a.out, "original", name), quality=95)
        for k in range(2):
            copy = f"{2000 + i:04d}{k + 1:02d}.jpg"
            save(strong_edit(img, k, rng), os.path.join(a.out, "strong", copy))
        for q in (3, 5, 8, 10, 15, 20, 30, 50, 75):
            save(img, os.path.join(a.out, "jpegqual", str(q), name), quality=q)
        for p in (10, 15, 20, 30, 40, 50, 60, 70, 80):
            keep = (1 - p / 100) ** 0.5
            cw, ch = max(8, int(size[0] * keep)), max(8, int(size[1] * keep))
            x, y = (size[0] - cw) // 2, (size[1] - ch) // 2
            save(img.crop((x, y, x + cw, y + ch)), os.path.join(a.out, "crops", str(p), name))
    for folder, count, seed in (("distractors", a.originals, 3), ("whitening", 2 * a.originals, 4)):
        for i in range(count):
            rng = np.random.default_rng([62, seed, i])
            img = random_crop(rng, photo(SOURCES[(i + 5) % len(SOURCES)]), (448, 336))
            save(img, os.path.join(a.out, folder, f"{folder[0]}{i:04d}.jpg"))
    return {"originals": a.originals, "strong": 2 * a.originals, "copies_per_block": a.originals,
            "distractors": a.originals, "whitening": 2 * a.originals}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    d = sub.add_parser("davis")
    d.add_argument("out")
    d.add_argument("--videos", type=int, default=2)
    d.add_argument("--frames", type=int, default=16)
    c = sub.add_parser("copydays")
    c.add_argument("out")
    c.add_argument("--originals", type=int, default=12)
    a = p.parse_args()
    if a.what == "davis" and (a.videos < 1 or a.frames < 3):
        p.error("--videos must be at least 1, --frames at least 3 (J&F skips the first and last)")
    if a.what == "copydays" and a.originals < 1:
        p.error("--originals must be at least 1")
    start = time.time()
    info = davis(a) if a.what == "davis" else copydays(a)
    print(json.dumps({"out": a.out, **info, "seconds": round(time.time() - start, 1)}))


if __name__ == "__main__":
    main()
