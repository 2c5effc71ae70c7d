#!/usr/bin/python3
"""Golden outputs of Pillow/torchvision for tests/augment/test_augment_golden.cpp.

Run from anywhere with Debian's Python (Pillow 9.4, torchvision 0.14):
    /usr/bin/python3 tests/data/augment/make_golden.py               # goldens from the inputs
    /usr/bin/python3 tests/data/augment/make_golden.py --extract     # re-cut the inputs first

Inputs (committed, RGB PNG):
  photo_a.png  64x48 cut of the STM32F3 board photo f3.jpg (Rust embedded book, installed at
               ~/.rustup/toolchains/stable-*/share/doc/rust/html/embedded-book/assets/f3.jpg),
               left 260 top 120 at full size, then 4:1 box-reduced.
  photo_b.png  53x37 cut of jetty-pic.png (sky, sea and logo photo from the Jetty demo in the
               Google Cloud SDK, .../jetty-home/modules/demo.d/root/images/jetty-pic.png).
  fmnist.png   Fashion-MNIST training image 0 (/usr/share/datasets/fashion-mnist), grey -> RGB.
  tiny.png     5x3 cut of photo_a (blur wider than the image, ToTensor values).
Their sizes make CenterCrop hit both rounding ties (14.5 -> 14, 17.5 -> 18).

Every golden is one line of cases.txt: `<op> <input> <parameters...> <output file>`.
"""
import argparse
import gzip
import os
import sys

import numpy as np
import PIL
import torch
import torchvision.transforms.functional as F
from PIL import Image, ImageFilter, ImageOps
from torchvision import transforms
from torchvision.transforms import InterpolationMode

HERE = os.path.dirname(os.path.abspath(__file__))
F3 = os.path.expanduser("~/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/"
                        "html/embedded-book/assets/f3.jpg")
JETTY = ("/usr/lib/google-cloud-sdk/platform/google_appengine/google/appengine/tools/java/"
         "jetty12/jetty-home/modules/demo.d/root/images/jetty-pic.png")
FMNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
FILTERS = {"bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR}
MODES = {"bicubic": InterpolationMode.BICUBIC, "bilinear": InterpolationMode.BILINEAR}


def extract_inputs():
    f3 = Image.open(F3).convert("RGB")
    f3.crop((260, 120, 516, 312)).reduce(4).save(os.path.join(HERE, "photo_a.png"))
    jetty = Image.open(JETTY).convert("RGB")
    jetty.crop((100, 20, 312, 168)).reduce(4).save(os.path.join(HERE, "photo_b.png"))
    with gzip.open(FMNIST, "rb") as f:
        data = f.read()
    first = np.frombuffer(data, np.uint8, 28 * 28, 16).reshape(28, 28)
    Image.fromarray(first, "L").convert("RGB").save(os.path.join(HERE, "fmnist.png"))
    Image.open(os.path.join(HERE, "photo_a.png")).crop((30, 20, 35, 23)).save(
        os.path.join(HERE, "tiny.png"))


def load(name):
    return Image.open(os.path.join(HERE, name)).convert("RGB")


class Goldens:
    def __init__(self):
        self.lines = []
        self.count = 0

    def add(self, op, image_name, params, out):
        """out: a PIL image (saved as PNG) or a float32 array (saved raw, little-endian)."""
        if isinstance(out, Image.Image):
            fname = f"g{self.count:03d}_{op}.png"
            out.save(os.path.join(HERE, fname), optimize=True)
        else:
            fname = f"g{self.count:03d}_{op}.f32"
            np.ascontiguousarray(out, dtype="<f4").tofile(os.path.join(HERE, fname))
        self.count += 1
        self.lines.append(" ".join([op, image_name] + [repr(p) if isinstance(p, float) else str(p)
                                                        for p in params] + [fname]))


def resize_cases(g):
    cases = [
        ("photo_a.png", None, (32, 24)), ("photo_a.png", None, (23, 17)),
        ("photo_a.png", None, (100, 75)), ("photo_a.png", None, (64, 30)),
        ("photo_a.png", None, (40, 48)), ("photo_a.png", None, (90, 20)),
        ("photo_a.png", (5, 7, 41, 29), (24, 24)), ("photo_a.png", (5, 7, 41, 29), (50, 50)),
        ("photo_b.png", (0, 0, 53, 37), (13, 9)), ("photo_b.png", (11, 4, 30, 30), (96, 96)),
        ("fmnist.png", (3, 2, 20, 22), (64, 64)), ("fmnist.png", (10, 10, 1, 1), (7, 5)),
        ("photo_a.png", (0, 0, 64, 48), (64, 48)),
    ]
    for name, box, size in cases:
        img = load(name)
        if box is None:
            box = (0, 0, img.width, img.height)
        x, y, w, h = box
        for filt in ("bicubic", "bilinear"):
            # torchvision's resized_crop: crop, then resize the cropped image.
            out = img.crop((x, y, x + w, y + h)).resize(size, FILTERS[filt])
            g.add("resize", name, [filt, x, y, w, h, size[0], size[1]], out)


def blur_cases(g):
    for sigma in (0.1, 0.35, 0.7, 1.0, 1.2345, 1.5, 2.0, 3.3, 6.0):
        g.add("blur", "photo_a.png", [sigma], load("photo_a.png").filter(
            ImageFilter.GaussianBlur(radius=sigma)))
    for sigma in (0.9, 6.0):
        g.add("blur", "tiny.png", [sigma], load("tiny.png").filter(
            ImageFilter.GaussianBlur(radius=sigma)))
    g.add("blur", "photo_b.png", [1.77], load("photo_b.png").filter(
        ImageFilter.GaussianBlur(radius=1.77)))


def color_cases(g):
    ops = [("brightness", F.adjust_brightness, (0.6, 1.0, 1.3711, 1.4)),
           ("contrast", F.adjust_contrast, (0.6, 0.8312, 1.4)),
           ("saturation", F.adjust_saturation, (0.0, 0.8, 1.1937)),
           ("hue", F.adjust_hue, (-0.5, -0.1, -0.05, -0.0001, 0.03, 0.0777, 0.1, 0.5))]
    for name in ("photo_a.png", "photo_b.png"):
        for op, fn, factors in ops:
            for f in factors:
                g.add(op, name, [f], fn(load(name), f))
        g.add("grayscale", name, [], F.rgb_to_grayscale(load(name), num_output_channels=3))
        g.add("solarize", name, [], ImageOps.solarize(load(name), 128))


def plan_cases(g):
    """Fixed crop plans through the torchvision/PIL ops in DINO's order."""
    plans = [
        # box x y w h, size, flip, jitter, order, factors (b c s h), gray, blur, sigma, solarize
        ((3, 5, 50, 40), 32, 1, 1, (2, 0, 3, 1), (1.21, 0.77, 0.93, -0.061), 0, 1, 1.3, 0),
        ((0, 0, 64, 48), 40, 0, 1, (3, 1, 0, 2), (0.64, 1.33, 1.17, 0.088), 1, 0, 0.0, 1),
        ((10, 4, 29, 37), 24, 1, 0, (0, 1, 2, 3), (1.0, 1.0, 1.0, 0.0), 0, 1, 0.15, 1),
        ((7, 2, 40, 31), 36, 0, 1, (1, 3, 2, 0), (1.38, 0.61, 0.81, 0.012), 0, 1, 1.99, 0),
    ]
    fns = [F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue]
    for name in ("photo_a.png", "photo_b.png"):
        for box, size, flip, jitter, order, factors, gray, blur, sigma, sol in plans:
            img = load(name)
            x, y, w, h = box
            if x + w > img.width or y + h > img.height:
                continue
            out = F.resized_crop(img, y, x, h, w, [size, size], InterpolationMode.BICUBIC)
            if flip:
                out = F.hflip(out)
            if jitter:
                for op in order:
                    out = fns[op](out, factors[op])
            if gray:
                out = F.rgb_to_grayscale(out, num_output_channels=3)
            if blur:
                out = out.filter(ImageFilter.GaussianBlur(radius=sigma))
            if sol:
                out = ImageOps.solarize(out, 128)
            g.add("plan", name, [x, y, w, h, size, flip, jitter, *order, *factors, gray, blur,
                                 sigma, sol], out)


def eval_cases(g):
    for name in ("photo_a.png", "photo_b.png", "fmnist.png"):
        t = transforms.Compose([transforms.Resize(64, interpolation=MODES["bicubic"]),
                                transforms.CenterCrop(56)])
        g.add("eval", name, [56, 64, 1], t(load(name)))
        # The official sizes: keep every 8th pixel of the 224 crop (a small golden file).
        t = transforms.Compose([transforms.Resize(256, interpolation=MODES["bicubic"]),
                                transforms.CenterCrop(224)])
        full = np.asarray(t(load(name)))
        g.add("eval", name, [224, 256, 8], Image.fromarray(full[::8, ::8].copy()))


def tensor_cases(g):
    normalize = transforms.Compose([
        transforms.ToTensor(),
        transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    g.add("tensor", "tiny.png", [], normalize(load("tiny.png")).numpy())
    ramp = Image.fromarray(np.arange(256 * 3, dtype=np.uint8).reshape(16, 16, 3) % 256, "RGB")
    ramp.save(os.path.join(HERE, "ramp.png"))
    g.add("tensor", "ramp.png", [], normalize(ramp).numpy())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--extract", action="store_true", help="re-cut the input PNGs first")
    args = p.parse_args()
    if args.extract:
        extract_inputs()
    for f in os.listdir(HERE):
        if f.startswith("g") and f[1:4].isdigit():
            os.remove(os.path.join(HERE, f))
    g = Goldens()
    resize_cases(g)
    blur_cases(g)
    color_cases(g)
    plan_cases(g)
    eval_cases(g)
    tensor_cases(g)
    with open(os.path.join(HERE, "cases.txt"), "w") as f:
        f.write("# op input parameters... output -- written by make_golden.py\n")
        f.write("\n".join(g.lines) + "\n")
    print(f"{g.count} goldens, torch {torch.__version__}, Pillow {PIL.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
