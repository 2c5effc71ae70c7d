#!/usr/bin/python3
"""Golden values for tests/eval/test_official_goldens.cpp, made by the official functions themselves.

The official code is not part of this project: this script imports it from checkouts made by
scripts/fetch_official.sh (bench/reference/official/dino,
bench/reference/official/davis2017-evaluation) and calls its functions on seeded inputs. Inputs and
outputs go to official_goldens.pth (torch.save), which the C++ test reads with core/pth and feeds to
our implementations:
  compute_map    utils.compute_map (revisited mAP, mP@k with junk), with an empty query and a
                 query without a 'junk' key
  copydays       eval_copy_detection.py's whitening (utils.PCA trained on X^T X / N, mean of
                 the whitening set subtracted), L2 normalisation, top-20 and
                 CopydaysDataset.eval_result (each query's AP recorded by wrapping the
                 module's score_ap_from_ranks_1, so the numbers keep full precision)
  multi_scale    utils.multi_scale with a fixed differentiable-free "model" whose output
                 depends on every interpolated pixel (batch of 2: the norm is the batch's)
  propagation    eval_video_segmentation.restrict_neighborhood, label_propagation (its
                 extract_feature replaced by the stored target features) and norm_mask
  davis          davis2017.metrics.db_eval_iou, db_eval_boundary (with cv2; the default
                 bound_th, 0.015 where ceil and round differ, and 3 pixels) and
                 davis2017.utils.db_statistics on random blob masks with void pixels
Run (from the repository root, once the checkouts exist; needs python3-torch, -opencv,
-torchvision, -tqdm, -skimage):
  /usr/bin/python3 tests/data/eval_goldens/make_official_goldens.py [bench/reference/official]
"""
import os
import sys
import types

import numpy as np
import torch

official = sys.argv[1] if len(sys.argv) > 1 else "bench/reference/official"
sys.path.insert(0, os.path.join(official, "dino"))
sys.path.insert(0, os.path.join(official, "davis2017-evaluation"))
torch.Tensor.cuda = lambda self, *a, **k: self  # the scripts move everything to the GPU

import utils  # noqa: E402  (official dino)
import eval_copy_detection as ecd  # noqa: E402
import eval_video_segmentation as evs  # noqa: E402
from davis2017 import metrics as davis_metrics  # noqa: E402
from davis2017 import utils as davis_utils  # noqa: E402

rng = np.random.default_rng(20261125)
out = {}


# ---------------------------------------------------------------- compute_map
def make_compute_map():
    db, nq = 40, 6
    ranks = np.stack([rng.permutation(db) for _ in range(nq)], axis=1)  # (db, nq)
    gnd = []
    for q in range(nq):
        pool = rng.permutation(db)
        n_ok = 0 if q == 2 else int(rng.integers(1, 8))
        n_junk = int(rng.integers(0, 6))
        entry = {"ok": pool[:n_ok].tolist(), "junk": pool[n_ok:n_ok + n_junk].tolist()}
        if q == 4:
            del entry["junk"]  # compute_map's try/except: no junk list at all
        gnd.append(entry)
    kappas = [1, 5, 10]
    m, aps, pr, prs = utils.compute_map(ranks, gnd, kappas)
    out["compute_map"] = {
        "ranks": torch.from_numpy(ranks.astype(np.int64)),
        "ok": [torch.tensor(g["ok"], dtype=torch.int64) for g in gnd],
        "junk": [torch.tensor(g.get("junk", []), dtype=torch.int64) for g in gnd],
        "kappas": torch.tensor(kappas, dtype=torch.int64),
        "map": float(m),
        "aps": torch.from_numpy(aps),
        "pr": torch.from_numpy(pr),
        "prs": torch.from_numpy(prs),
    }


# ---------------------------------------------------------------- copy detection
def make_copydays(tmp):
    n_orig, n_distractors, n_whitening, dim = 6, 16, 40, 12
    names = ["20%02d00.jpg" % i for i in range(n_orig)]
    strong = ["20%02d%02d.jpg" % (i, k) for i in range(n_orig) for k in (1, 2) if (i + k) % 5]
    ds = ecd.CopydaysDataset(tmp)
    for b, block in enumerate(ds.block_names):
        os.makedirs(os.path.join(tmp, block))
        for f in (strong if block == "strong" else names):
            open(os.path.join(tmp, block, f), "wb").close()
    sizes = [len(strong) if b == "strong" else n_orig for b in ds.block_names]
    ds.q_block_sizes = np.array(sizes)  # the script's 157/229 are real Copydays' sizes

    originals = rng.standard_normal((n_orig, dim)).astype(np.float32)
    queries = []
    for b, block in enumerate(ds.block_names):
        if block == "strong":
            src = originals[[int(f[2:4]) for f in strong]]
            noise = 1.2
        else:
            src = originals
            noise = 0.05 * (1 + b)
        queries.append(src + noise * rng.standard_normal(src.shape).astype(np.float32))
    queries = torch.from_numpy(np.concatenate(queries))
    database = torch.from_numpy(np.concatenate(
        [originals, rng.standard_normal((n_distractors, dim)).astype(np.float32)]))
    whitening = torch.from_numpy(
        (rng.standard_normal((n_whitening, dim)) * np.linspace(0.2, 3.0, dim) + 0.4)
        .astype(np.float32))

    def search(q, d, w):
        q, d = q.clone(), d.clone()
        if w is not None:  # the script's main block, step by step
            mean_feature = torch.mean(w, dim=0)
            d -= mean_feature
            q -= mean_feature
            pca = utils.PCA(dim=d.shape[-1], whit=0.5)
            pca.train_pca((torch.mm(w.T, w) / w.shape[0]).numpy())
            d, q = pca.apply(d), pca.apply(q)
        d = torch.nn.functional.normalize(d, dim=1, p=2)
        q = torch.nn.functional.normalize(q, dim=1, p=2)
        similarity = torch.mm(q, d.T)
        distances, indices = similarity.topk(20, largest=True, sorted=True)
        aps = []
        original_ap = ecd.score_ap_from_ranks_1
        ecd.score_ap_from_ranks_1 = lambda r, n: aps.append(original_ap(r, n)) or aps[-1]
        try:
            ds.eval_result(indices, distances)
        finally:
            ecd.score_ap_from_ranks_1 = original_ap
        bounds = np.cumsum([0] + sizes)
        block_map = [float(np.sum(aps[bounds[i]:bounds[i + 1]]) / sizes[i])
                     for i in range(len(sizes))]
        return {"ids": indices.to(torch.int64), "similarity": distances,
                "aps": torch.tensor(aps, dtype=torch.float64),
                "block_map": torch.tensor(block_map, dtype=torch.float64)}

    out["copydays"] = {
        "block_names": list(ds.block_names),
        "originals": names,
        "strong": strong,
        "queries": queries,
        "database": database,
        "whitening": whitening,
        "plain": search(queries, database, None),
        "whitened": search(queries, database, whitening),
    }


# ---------------------------------------------------------------- multi_scale
def probe_model(x):
    """Stands in for the backbone: a (B, 12) output that depends on every pixel's value and
    position, so any difference in the interpolated images shows."""
    b, c, h, w = x.shape
    ys = torch.linspace(-1, 1, h).view(1, 1, h, 1)
    xs = torch.linspace(-1, 1, w).view(1, 1, 1, w)
    return torch.cat([x.mean((2, 3)), (x * ys).mean((2, 3)), (x * xs).mean((2, 3)),
                      (x * x).mean((2, 3))], dim=1)


def make_multi_scale():
    images = torch.from_numpy(rng.standard_normal((2, 3, 37, 53)).astype(np.float32))
    out["multi_scale"] = {"images": images, "features": utils.multi_scale(images, probe_model)}


# ---------------------------------------------------------------- label propagation
def make_propagation():
    h, w, dim, n, classes, topk = 6, 9, 8, 4, 3, 5
    cases = []
    for radius in (2, 0):
        evs.args = types.SimpleNamespace(size_mask_neighborhood=radius, topk=topk)
        target = torch.from_numpy(rng.standard_normal((h * w, dim)).astype(np.float32))
        sources = [torch.from_numpy(rng.standard_normal((dim, h * w)).astype(np.float32))
                   for _ in range(n)]
        segs = [torch.from_numpy(rng.random((1, classes, h, w)).astype(np.float32))
                for _ in range(n)]
        segs[0] = (segs[0] > 0.6).float()  # the first frame's one-hot-like mask
        frame = torch.zeros(3, h * 8, w * 8)
        original = evs.extract_feature
        evs.extract_feature = lambda model, f, return_h_w=False: (target, h, w)
        try:
            seg, feat, mask = evs.label_propagation(evs.args, None, frame, sources, segs)
        finally:
            evs.extract_feature = original
        case = {"radius": radius, "topk": topk, "target": target,
                "sources": torch.stack(sources), "segs": torch.cat(segs), "result": seg,
                "returned_features": feat}
        if radius > 0:
            case["neighbourhood"] = evs.restrict_neighborhood(h, w)
        cases.append(case)
    mask = torch.from_numpy(rng.random((3, 5, 7)).astype(np.float32))
    mask[1] = 0.0  # a channel whose max is not > 0 stays as it is
    mask[2] -= 0.5
    out["propagation"] = cases
    out["norm_mask"] = {"input": mask.clone(), "output": evs.norm_mask(mask.clone())}


# ---------------------------------------------------------------- J and F
def blob(h, w, cy, cx, ry, rx):
    yy, xx = np.mgrid[0:h, 0:w]
    return ((yy - cy) ** 2 / ry ** 2 + (xx - cx) ** 2 / rx ** 2) <= 1.0


def make_davis():
    frames, h, w = 9, 48, 64
    gt, pred, void = [], [], []
    for t in range(frames):
        g = blob(h, w, 20 + t, 25 + 2 * t, 10, 14)
        p = blob(h, w, 21 + t + rng.integers(-2, 3), 24 + 2 * t + rng.integers(-3, 4),
                 9 + rng.integers(0, 3), 13 + rng.integers(0, 4))
        p ^= rng.random((h, w)) < 0.01  # speckles: boundary pixels far from the object
        v = np.zeros((h, w), bool)
        v[rng.integers(0, h - 6):, :3] = True
        if t == 3:
            p[:] = False  # a frame where the object is lost
        if t == 5:
            g[:] = False  # and one where it left the frame
        gt.append(g), pred.append(p), void.append(v)
    gt, pred, void = np.stack(gt), np.stack(pred), np.stack(void)
    j = davis_metrics.db_eval_iou(gt, pred, void)
    f = davis_metrics.db_eval_boundary(gt, pred, void)
    f_no_void = davis_metrics.db_eval_boundary(gt, pred)
    f_wide = davis_metrics.db_eval_boundary(gt, pred, void, bound_th=0.015)  # 1.2 px: ceil 2
    f_pixels = davis_metrics.db_eval_boundary(gt, pred, void, bound_th=3)  # >= 1: in pixels
    per_frame = rng.random(13)
    per_frame[4] = np.nan
    out["davis"] = {
        "gt": torch.from_numpy(gt.astype(np.uint8)),
        "pred": torch.from_numpy(pred.astype(np.uint8)),
        "void": torch.from_numpy(void.astype(np.uint8)),
        "j": torch.from_numpy(j.astype(np.float64)),
        "f": torch.from_numpy(f.astype(np.float64)),
        "f_no_void": torch.from_numpy(f_no_void.astype(np.float64)),
        "f_wide": torch.from_numpy(f_wide.astype(np.float64)),
        "f_pixels": torch.from_numpy(f_pixels.astype(np.float64)),
        "per_frame": torch.from_numpy(per_frame),
        "statistics": torch.tensor(davis_utils.db_statistics(per_frame), dtype=torch.float64),
        "statistics_j": torch.tensor(davis_utils.db_statistics(j), dtype=torch.float64),
    }


if __name__ == "__main__":
    import tempfile
    make_compute_map()
    with tempfile.TemporaryDirectory() as tmp:
        make_copydays(os.path.join(tmp, "copydays"))
    make_multi_scale()
    make_propagation()
    make_davis()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "official_goldens.pth")
    torch.save(out, path)
    print("wrote", path, os.path.getsize(path), "bytes")
