#!/usr/bin/python3
"""Builds small retrieval-style test sets in the real datasets' layouts from the photos that
python3-skimage ships (no download): a Copydays-like set and a revisited-Oxford-like set.

  make_sets.py copydays OUT   OUT/{original,strong,jpegqual/<q>,crops/<p>}/*.jpg,
                              OUT/distractors/*.jpg, OUT/whitening/*.jpg
  make_sets.py copydays OUT --originals N   the same with the first N (at most 12) of its
                              originals and their copies: a smaller set, for tests that only
                              run the command
  make_sets.py copydays OUT --hard   the same layout, but strong/ holds 4 copies per original
                              made of the edits DINO trains invariance to (a resized crop, a
                              flip, strong colour changes, grayscale), and more distractors
  make_sets.py copydays OUT --hard --originals N   the same with N originals (the first 12 are
                              the default's) and 40 N / 12 distractors: more queries per block
  make_sets.py photos OUT COUNT     COUNT unlabelled 96 x 96 crops of the same photos
                              (OUT/NNNNN.png; other crops than the sets'), to train on
  make_sets.py revisited OUT  OUT/roxford5k/jpg/*.jpg and OUT/ground.json: imlist, qimlist and
                              gnd (easy/hard/junk/bbx per query), which the C++ test pickles
                              into gnd_roxford5k.pkl with our pickler.
Deterministic (seeded); every copy derives from its original by the named edit.
"""
import json
import os
import random
import sys

import numpy as np
from PIL import Image, ImageFilter, ImageOps, ImageEnhance

SKIMAGE = "/usr/lib/python3/dist-packages/skimage/data"
PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
          "hubble_deep_field.jpg", "retina.jpg", "ihc.png", "camera.png", "coins.png",
          "moon.png", "cell.png", "clock_motion.png", "page.png"]
TEXTURES = ["brick.png", "grass.png", "gravel.png"]


def load(name):
    return Image.open(os.path.join(SKIMAGE, name)).convert("RGB")


def scenes(count, size, seed):
    """`count` different crops (size w x h) from the photos, round-robin over photos."""
    rng = random.Random(seed)
    out = []
    photos = [load(p) for p in PHOTOS]
    i = 0
    while len(out) < count:
        im = photos[i % len(photos)]
        w, h = size
        scale = rng.uniform(1.0, max(1.0, min(im.width / w, im.height / h)))
        cw, ch = int(w * scale), int(h * scale)
        x = rng.randint(0, im.width - cw)
        y = rng.randint(0, im.height - ch)
        out.append(im.crop((x, y, x + cw, y + ch)).resize(size, Image.BICUBIC))
        i += 1
    return out


def save(im, path, quality=90):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    im.save(path, quality=quality)


def strong_edit(im, k, rng):
    """Copydays' "strong" attacks are heavy manual edits; two of our own per original."""
    if k == 0:
        out = ImageOps.mirror(im).filter(ImageFilter.GaussianBlur(2))
        out = ImageEnhance.Color(out).enhance(0.3)
    else:
        w, h = im.size
        out = im.crop((w // 6, h // 8, w - w // 10, h - h // 6)).resize((w, h), Image.BILINEAR)
        out = ImageEnhance.Contrast(out).enhance(1.8)
        arr = np.asarray(out).copy()
        arr[h // 2 - 6: h // 2 + 6, :, :] = rng.randint(0, 255)  # a band painted over
        out = Image.fromarray(arr)
    return out


def copies(im, name, out):
    """The JPEG-quality and crop blocks of one original: copies at its sorted position."""
    for q in [3, 5, 8, 10, 15, 20, 30, 50, 75]:
        save(im, os.path.join(out, "jpegqual", str(q), name), quality=q)
    for p in [10, 15, 20, 30, 40, 50, 60, 70, 80]:
        # p % of the surface removed, the centre kept
        keep = (1 - p / 100) ** 0.5
        w, h = im.size
        cw, ch = max(8, int(w * keep)), max(8, int(h * keep))
        x, y = (w - cw) // 2, (h - ch) // 2
        save(im.crop((x, y, x + cw, y + ch)), os.path.join(out, "crops", str(p), name))


def dino_view(im, k, rng):
    """A copy made of DINO's augmentations, strong ones: a crop of 40-80 % of the surface
    resized back, a flip, and a colour change (grayscale, or hue, saturation, contrast and
    brightness)."""
    w, h = im.size
    area = rng.uniform(0.4, 0.8)
    cw, ch = int(w * area ** 0.5), int(h * area ** 0.5)
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    out = im.crop((x, y, x + cw, y + ch)).resize((w, h), Image.BICUBIC)
    if k % 2 == 0:
        out = ImageOps.mirror(out)
    if k in (0, 3):
        out = ImageOps.grayscale(out).convert("RGB")
    else:
        hsv = np.asarray(out.convert("HSV")).copy()
        hsv[..., 0] = (hsv[..., 0].astype(int) + rng.randint(40, 215)) % 256
        out = Image.fromarray(hsv, "HSV").convert("RGB")
        out = ImageEnhance.Color(out).enhance(rng.uniform(0.5, 1.5))
    out = ImageEnhance.Contrast(out).enhance(rng.uniform(0.6, 1.4))
    return ImageEnhance.Brightness(out).enhance(rng.uniform(0.6, 1.4))


def copydays_hard(out, count=12):
    rng = random.Random(11)
    originals = scenes(count, (160, 120), seed=2)
    for i, im in enumerate(originals):
        name = "20%02d00.jpg" % i
        save(im, os.path.join(out, "original", name), quality=95)
        for k in range(4):
            save(dino_view(im, k, rng), os.path.join(out, "strong", "20%02d%02d.jpg" % (i, k + 1)))
        copies(im, name, out)
    for i, im in enumerate(scenes(40 * count // 12, (150, 110), seed=3)):
        save(im, os.path.join(out, "distractors", "d%03d.jpg" % i))


def photos(out, count):
    os.makedirs(out, exist_ok=True)
    for i, im in enumerate(scenes(count, (96, 96), seed=8)):
        im.save(os.path.join(out, "%05d.png" % i))


def copydays(out):
    count = 12
    if "--originals" in sys.argv:
        count = int(sys.argv[sys.argv.index("--originals") + 1])
    if "--hard" in sys.argv[3:]:
        return copydays_hard(out, count)
    if not 1 <= count <= 12:
        sys.exit("make_sets.py: copydays without --hard has 1 to 12 originals, not %d" % count)
    rng = random.Random(1)
    originals = scenes(12, (160, 120), seed=2)[:count]  # the first N: the same images and edits
    for i, im in enumerate(originals):
        name = "20%02d00.jpg" % i  # Copydays-style: copies share the first 4 characters
        save(im, os.path.join(out, "original", name), quality=95)
        for k in range(2):
            save(strong_edit(im, k, rng), os.path.join(out, "strong", "20%02d%02d.jpg" % (i, k + 1)))
        copies(im, name, out)
    for i, im in enumerate(scenes(10, (150, 110), seed=3)):
        save(im, os.path.join(out, "distractors", "d%03d.jpg" % i))
    for i, im in enumerate(scenes(24, (140, 140), seed=4)):
        save(im, os.path.join(out, "whitening", "w%03d.jpg" % i))


def revisited(out):
    rng = random.Random(5)
    landmarks = scenes(6, (200, 150), seed=6)
    imlist, qimlist, gnd = [], [], []
    jpg = os.path.join(out, "roxford5k", "jpg")
    db = []
    for q, im in enumerate(landmarks):
        entry = {"easy": [], "hard": [], "junk": [], "bbx": [10.0, 10.0, 190.0, 140.0]}
        w, h = im.size
        views = [("easy", im.resize((300, 225), Image.BICUBIC)),
                 ("easy", ImageEnhance.Brightness(im).enhance(1.3)),
                 ("hard", ImageOps.mirror(im).crop((30, 20, w, h)).resize((260, 170))),
                 ("hard", im.filter(ImageFilter.GaussianBlur(3)).rotate(10)),
                 ("junk", im.crop((0, 0, w // 3, h // 3)).resize((120, 90)))]
        for kind, view in views:
            db.append((kind, q, view))
        qimlist.append("query_%02d" % q)
        save(im, os.path.join(jpg, qimlist[-1] + ".jpg"))
        gnd.append(entry)
    for i, im in enumerate(scenes(10, (220, 160), seed=7)):
        db.append(("none", -1, im))
    rng.shuffle(db)
    for i, (kind, q, view) in enumerate(db):
        imlist.append("db_%03d" % i)
        save(view, os.path.join(jpg, imlist[-1] + ".jpg"))
        if q >= 0:
            gnd[q][kind].append(i)
    with open(os.path.join(out, "ground.json"), "w") as f:
        json.dump({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}, f)


if __name__ == "__main__":
    if sys.argv[1] == "photos":
        photos(sys.argv[2], int(sys.argv[3]))
    else:
        {"copydays": copydays, "revisited": revisited}[sys.argv[1]](sys.argv[2])
