#!/usr/bin/python3
"""Video-segmentation numbers recomputed in Python, from the definitions of
eval_video_segmentation.py (label propagation with its neighbourhood mask built pair by pair)
and of the davis2017-evaluation toolkit (J, F with a disk-dilated boundary, db_statistics).
Written for this project from those definitions (docs/evaluation.md), not copied.

  propagate IN.pth OUT.pth    IN: {"target" (hw, C), "sources" (n, C, hw), "segs" (n, K, h, w),
                              "radius", "topk"}; OUT: the (1, K, h, w) propagated mask
  nearest IN.pth OUT.pth      IN: {"labels" uint8 (h, w), "width", "height"}: PIL NEAREST resize
  jf DAVIS_ROOT RESULTS       J&F of RESULTS/<video>/*.png against DAVIS_ROOT's annotations:
                              JSON {"sequences": {video: [{"J": [m, r, d], "F": [m, r, d]}]},
                              "JF": x, "J": [m, r, d], "F": [m, r, d]}
"""
import json
import math
import os
import sys

import numpy as np
import torch
from PIL import Image
from skimage.morphology import binary_dilation, disk


def neighbourhood(h, w, r):
    mask = torch.zeros(h, w, h, w)
    for i in range(h):
        for j in range(w):
            for di in range(-r, r + 1):
                for dj in range(-r, r + 1):
                    if 0 <= i + di < h and 0 <= j + dj < w:
                        mask[i, j, i + di, j + dj] = 1
    return mask.reshape(h * w, h * w)


def propagate(inp, out):
    d = torch.load(inp)
    target, sources, segs = d["target"], d["sources"], d["segs"]
    n, k, h, w = segs.shape
    target = torch.nn.functional.normalize(target, dim=1, p=2)
    sources = torch.nn.functional.normalize(sources, dim=1, p=2)
    aff = torch.exp(torch.bmm(target.unsqueeze(0).repeat(n, 1, 1), sources) / 0.1)
    if int(d["radius"]) > 0:
        aff = aff * neighbourhood(h, w, int(d["radius"])).unsqueeze(0)
    aff = aff.transpose(2, 1).reshape(-1, h * w)
    smallest_kept = torch.topk(aff, dim=0, k=int(d["topk"]))[0].min(dim=0)[0]
    aff[aff < smallest_kept] = 0
    aff = aff / aff.sum(dim=0, keepdim=True)
    flat = segs.reshape(n, k, -1).transpose(2, 1).reshape(-1, k).T
    torch.save(torch.mm(flat, aff).reshape(1, k, h, w), out)


def nearest(inp, out):
    d = torch.load(inp)
    im = Image.fromarray(d["labels"].numpy()).resize((int(d["width"]), int(d["height"])), 0)
    torch.save(torch.from_numpy(np.asarray(im).copy()), out)


def boundary(seg):
    seg = seg.astype(bool)
    e = np.zeros_like(seg); s = np.zeros_like(seg); se = np.zeros_like(seg)
    e[:, :-1] = seg[:, 1:]
    s[:-1, :] = seg[1:, :]
    se[:-1, :-1] = seg[1:, 1:]
    b = (seg ^ e) | (seg ^ s) | (seg ^ se)
    b[-1, :] = seg[-1, :] ^ e[-1, :]
    b[:, -1] = seg[:, -1] ^ s[:, -1]
    b[-1, -1] = 0
    return b


def j_measure(gt, res, void):
    union = ((gt | res) & ~void).sum()
    return 1.0 if union == 0 else ((gt & res) & ~void).sum() / union


def f_measure(gt, res, void, th=0.008):
    r = math.ceil(th * np.linalg.norm(gt.shape))
    fb, gb = boundary(res & ~void), boundary(gt & ~void)
    fd, gd = binary_dilation(fb, disk(r)), binary_dilation(gb, disk(r))
    nf, ng = fb.sum(), gb.sum()
    if nf == 0 and ng > 0:
        p, rc = 1, 0
    elif nf > 0 and ng == 0:
        p, rc = 0, 1
    elif nf == 0 and ng == 0:
        p, rc = 1, 1
    else:
        p, rc = (fb & gd).sum() / nf, (gb & fd).sum() / ng
    return 0.0 if p + rc == 0 else 2 * p * rc / (p + rc)


def stats(values):
    v = np.array(values, dtype=np.float64)
    mean, recall = np.nanmean(v), np.nanmean(v > 0.5)
    edges = (np.round(np.linspace(1, len(v), 5) + 1e-10) - 1).astype(int)
    bins = [v[edges[i]:edges[i + 1] + 1] for i in range(4)]
    return [float(mean), float(recall), float(np.nanmean(bins[0]) - np.nanmean(bins[3]))]


def jf(root, results):
    videos = [l.strip() for l in open(os.path.join(root, "ImageSets", "2017", "val.txt")) if l.strip()]
    out, all_j, all_f = {}, [], []
    for v in videos:
        ann = os.path.join(root, "Annotations", "480p", v)
        names = sorted(f for f in os.listdir(ann) if f.endswith(".png"))
        gt = [np.asarray(Image.open(os.path.join(ann, f))) for f in names]
        res = [np.asarray(Image.open(os.path.join(results, v, f))) for f in names]
        objects = max(int(np.where(g == 255, 0, g).max()) for g in gt)
        seq = []
        for o in range(1, objects + 1):
            js, fs = [], []
            for t in range(1, len(names) - 1):
                void = gt[t] == 255
                js.append(j_measure(gt[t] == o, res[t] == o, void))
                fs.append(f_measure(gt[t] == o, res[t] == o, void))
            seq.append({"J": stats(js), "F": stats(fs)})
            all_j.append(seq[-1]["J"])
            all_f.append(seq[-1]["F"])
        out[v] = seq
    mj, mf = np.mean(all_j, axis=0).tolist(), np.mean(all_f, axis=0).tolist()
    print(json.dumps({"sequences": out, "J": mj, "F": mf, "JF": (mj[0] + mf[0]) / 2}))


if __name__ == "__main__":
    {"propagate": propagate, "nearest": nearest, "jf": jf}[sys.argv[1]](*sys.argv[2:])
