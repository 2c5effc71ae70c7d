#!/usr/bin/python3
"""Fixtures of the dataset/decoder/sampler tests, and their golden values, from the references.

Run from anywhere with Debian's Python (Pillow, torch, torchvision):
    /usr/bin/python3 tests/data/datasets/make_fixtures.py
It rewrites everything in this folder except itself. What it makes:
  folder/{train,val}/<class>/...  a tiny ImageFolder in every format OpenCV and PIL both read
                                  (PNG RGB/L/LA/RGBA/P+transparency/16-bit, JPEG RGB/gray,
                                  BMP, WebP, TIFF, PPM, PGM), upper-case extensions, a nested
                                  folder and files torchvision ignores.
  flat/                           an unlabeled flat folder.
  exif/rot{3,6,8}.jpg             JPEGs with an EXIF orientation tag.
  corrupt/                        a truncated JPEG, a truncated PNG, a non-image .png.
  decoded.txt + decoded/*.rgb     PIL's pixels: `relpath width height rgbfile` per line,
                                  rgbfile = height*width*3 bytes, RGB, row-major.
  samples_train.txt, samples_val.txt
                                  torchvision ImageFolder(...).classes and .samples.
  sampler.txt                     torch DistributedSampler indices.
"""
import os
import shutil

import numpy as np
import torch
from PIL import Image, ImageOps
from torch.utils.data.distributed import DistributedSampler
from torchvision.datasets import ImageFolder

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261121)


def rgb(h, w):
    # Smooth content plus noise: JPEG keeps it small, and pixel errors would still show.
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 7 % 256], 2)
    noise = rng.integers(-20, 21, (h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def save(rel, image, **kw):
    path = os.path.join(HERE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    image.save(path, **kw)
    return rel


def write_text(rel, text):
    with open(os.path.join(HERE, rel), "w") as f:
        f.write(text)


def main():
    for d in ["folder", "flat", "exif", "corrupt", "decoded"]:
        shutil.rmtree(os.path.join(HERE, d), ignore_errors=True)

    images = []  # files whose decoded pixels are golden
    # class "cat": RGB PNG, RGB JPEG, gray JPEG with an upper-case extension, a nested RGBA PNG.
    images.append(save("folder/train/cat/a.png", Image.fromarray(rgb(9, 13))))
    images.append(save("folder/train/cat/b.jpg", Image.fromarray(rgb(10, 12)), quality=90))
    images.append(save("folder/train/cat/c.JPEG", Image.fromarray(rgb(8, 11)[:, :, 1]), quality=85))
    rgba = np.concatenate([rgb(7, 10), rng.integers(0, 256, (7, 10, 1), dtype=np.uint8)], 2)
    images.append(save("folder/train/cat/sub/d.png", Image.fromarray(rgba, "RGBA")))
    write_text("folder/train/cat/notes.txt", "not an image: torchvision skips it\n")
    write_text("folder/train/cat/e.gif.bak", "not an image either\n")
    # class "dog": L, P with a transparent index, BMP, WebP (lossless), TIFF.
    images.append(save("folder/train/dog/e.png", Image.fromarray(rgb(9, 9)[:, :, 0])))
    pal = Image.fromarray(rgb(8, 12)).convert("P", palette=Image.ADAPTIVE, colors=6)
    images.append(save("folder/train/dog/f.png", pal, transparency=0))
    images.append(save("folder/train/dog/g.BMP", Image.fromarray(rgb(6, 7))))
    images.append(save("folder/train/dog/h.webp", Image.fromarray(rgb(8, 8)), lossless=True))
    images.append(save("folder/train/dog/i.tiff", Image.fromarray(rgb(5, 9))))
    # class "bird" (sorts first): LA PNG, PPM, PGM, and a 16-bit grayscale PNG.
    la = np.stack([rgb(6, 6)[:, :, 2], rng.integers(0, 256, (6, 6), dtype=np.uint8)], 2)
    images.append(save("folder/train/bird/k.png", Image.fromarray(la, "LA")))
    images.append(save("folder/train/bird/l.ppm", Image.fromarray(rgb(5, 6))))
    images.append(save("folder/train/bird/m.pgm", Image.fromarray(rgb(6, 5)[:, :, 0])))
    g16 = rng.integers(0, 65536, (5, 7)).astype(np.uint16)
    save("folder/train/bird/n16.png", Image.fromarray(g16))
    # val: two classes, one image each, plus an empty-looking name order check.
    images.append(save("folder/val/cat/v1.png", Image.fromarray(rgb(9, 8))))
    images.append(save("folder/val/dog/v2.jpg", Image.fromarray(rgb(8, 9)), quality=90))
    images.append(save("folder/val/dog/V0.png", Image.fromarray(rgb(4, 4))))

    for name in ["z.png", "a.png", "m.jpg"]:
        images.append(save("flat/" + name, Image.fromarray(rgb(6, 8))))

    # EXIF orientation: 3 = rotate 180, 6 = rotate 90 CW to display, 8 = 90 CCW.
    exif_files = []
    for o in (3, 6, 8):
        exif = Image.Exif()
        exif[0x0112] = o
        exif_files.append(save("exif/rot%d.jpg" % o, Image.fromarray(rgb(6, 10)), quality=92,
                               exif=exif.tobytes()))

    os.makedirs(os.path.join(HERE, "corrupt"))
    good = open(os.path.join(HERE, "folder/train/cat/b.jpg"), "rb").read()
    with open(os.path.join(HERE, "corrupt/truncated.jpg"), "wb") as f:
        f.write(good[: len(good) * 2 // 3])
    png = open(os.path.join(HERE, "folder/train/cat/a.png"), "rb").read()
    with open(os.path.join(HERE, "corrupt/truncated.png"), "wb") as f:
        f.write(png[: len(png) // 2])
    write_text("corrupt/not_an_image.png", "hello\n")

    # Golden pixels: PIL's convert("RGB") (the torchvision loader), EXIF transposed for exif/.
    # 16-bit greyscale is the one documented departure (PIL saturates, we keep the high byte).
    os.makedirs(os.path.join(HERE, "decoded"))
    lines = []
    for k, rel in enumerate(images + exif_files + ["folder/train/bird/n16.png"]):
        if rel.endswith("n16.png"):
            pixels = np.repeat((g16 >> 8).astype(np.uint8)[:, :, None], 3, 2)
        else:
            im = Image.open(os.path.join(HERE, rel))
            if rel.startswith("exif/"):
                im = ImageOps.exif_transpose(im)
            pixels = np.asarray(im.convert("RGB"))
        out = "decoded/%02d.rgb" % k
        pixels.tofile(os.path.join(HERE, out))
        lines.append("%s %d %d %s\n" % (rel, pixels.shape[1], pixels.shape[0], out))
    write_text("decoded.txt", "".join(lines))

    for split in ("train", "val"):
        ds = ImageFolder(os.path.join(HERE, "folder", split))
        text = "classes " + " ".join(ds.classes) + "\n"
        for path, label in ds.samples:
            text += "%s %d\n" % (os.path.relpath(path, os.path.join(HERE, "folder", split)), label)
        write_text("samples_%s.txt" % split, text)

    # DistributedSampler(shuffle, seed) of a dataset of n items, set_epoch(epoch), per rank.
    text = ""
    for n, world, seed, shuffle in [(10, 3, 0, True), (7, 4, 5, True), (5, 8, 0, True),
                                    (10, 3, 0, False), (64, 2, 1, True)]:
        for epoch in (0, 1, 7):
            for rank in range(world):
                s = DistributedSampler(list(range(n)), num_replicas=world, rank=rank,
                                       shuffle=shuffle, seed=seed)
                s.set_epoch(epoch)
                idx = list(iter(s))
                text += "%d %d %d %d %d %d : %s\n" % (n, world, rank, seed, int(shuffle), epoch,
                                                      " ".join(map(str, idx)))
    write_text("sampler.txt", text)


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
