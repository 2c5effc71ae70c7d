#!/usr/bin/python3
"""Builds a small DAVIS-2017-like set from python3-skimage's photos and textures (no download):
textured objects moving over textured backgrounds, the first-frame mask and ground truth for
every frame, in DAVIS's layout and palette.

  make_davis.py OUT [FRAMES]   OUT/ImageSets/2017/val.txt, OUT/JPEGImages/480p/<video>/NNNNN.jpg,
                               OUT/Annotations/480p/<video>/NNNNN.png (palette PNGs, 0 = background)
Deterministic; 2 videos of FRAMES (default 8) frames, 320 x 180, one with 2 objects.
"""
import os
import sys

import numpy as np
from PIL import Image, ImageDraw

SKIMAGE = "/usr/lib/python3/dist-packages/skimage/data"
W, H = 320, 180


def palette():
    pal = []
    for i in range(256):
        c, label = [0, 0, 0], i
        for shift in range(7, -1, -1):
            for ch in range(3):
                c[ch] |= ((label >> ch) & 1) << shift
            label >>= 3
            if label == 0:
                break
        pal.extend(c)
    return pal


def texture(name, tint, size, offset=(0, 0)):
    im = Image.open(os.path.join(SKIMAGE, name)).convert("L")
    im = im.crop((offset[0], offset[1], offset[0] + size[0], offset[1] + size[1]))
    arr = np.asarray(im, dtype=np.float32)[..., None] * np.array(tint, dtype=np.float32)[None, None]
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def video(out, name, objects, background, frames):
    jpg = os.path.join(out, "JPEGImages", "480p", name)
    ann = os.path.join(out, "Annotations", "480p", name)
    os.makedirs(jpg, exist_ok=True)
    os.makedirs(ann, exist_ok=True)
    for t in range(frames):
        frame = background.copy()
        labels = Image.new("L", (W, H), 0)
        for label, (tex, shape, (x0, y0), (dx, dy), (w, h)) in enumerate(objects, start=1):
            x, y = x0 + dx * t, y0 + dy * t
            shape_mask = Image.new("L", (w, h), 0)
            draw = ImageDraw.Draw(shape_mask)
            (draw.ellipse if shape == "ellipse" else draw.rectangle)((0, 0, w - 1, h - 1), fill=255)
            frame.paste(tex.crop((0, 0, w, h)), (x, y), shape_mask)
            labels.paste(Image.new("L", (w, h), label), (x, y), shape_mask)
        frame.save(os.path.join(jpg, "%05d.jpg" % t), quality=92)
        lab = labels.copy()
        lab = lab.convert("P")
        lab.putpalette(palette())
        lab.save(os.path.join(ann, "%05d.png" % t))


def main(out, frames):
    os.makedirs(os.path.join(out, "ImageSets", "2017"), exist_ok=True)
    grass = texture("grass.png", (0.5, 0.9, 0.4), (W, H))
    gravel = texture("gravel.png", (0.8, 0.75, 0.7), (W, H), (100, 50))
    astronaut = Image.open(os.path.join(SKIMAGE, "astronaut.png")).convert("RGB").crop((150, 30, 300, 180))
    brick = texture("brick.png", (1.0, 0.5, 0.3), (150, 150))
    coffee = Image.open(os.path.join(SKIMAGE, "coffee.png")).convert("RGB").crop((200, 100, 350, 250))
    video(out, "walk", [(astronaut, "ellipse", (30, 40), (12, 3), (90, 100))], grass, frames)
    video(out, "pair", [(brick, "rectangle", (20, 20), (10, 4), (80, 60)),
                        (coffee, "ellipse", (220, 90), (-9, -3), (70, 70))], gravel, frames)
    with open(os.path.join(out, "ImageSets", "2017", "val.txt"), "w") as f:
        f.write("walk\npair\n")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 8)
