#!/usr/bin/python3
"""The retrieval-style evaluations' numbers recomputed in Python (numpy/torch), from the
feature files `dino copy_detection` / `dino retrieval` dump, following the official scripts'
definitions step by step (eval_copy_detection.py's whitening, top-20 and eval_result with the
Holidays AP; eval_image_retrieval.py's ranking and utils.compute_map with its junk rule).
Written for this project from those definitions (docs/evaluation.md), not copied.

  copydays FEATURES_DIR DATA_PATH   -> JSON {"blocks": {name: mAP}, "strong": s, "all": a}
  revisited FEATURES_DIR GND_PKL    -> JSON {"mapM", "mapH", "mprM": [..], "mprH": [..]}
mAPs as fractions. The gnd pickle is read with Python's own pickle module.
"""
import json
import os
import pickle
import sys

import h5py
import numpy as np
import torch

BLOCKS = (["original", "strong"] + ["jpegqual/%d" % q for q in (3, 5, 8, 10, 15, 20, 30, 50, 75)]
          + ["crops/%d" % p for p in (10, 15, 20, 30, 40, 50, 60, 70, 80)])


def features(path):
    with h5py.File(path, "r") as f:
        return torch.from_numpy(np.asarray(f["features"], dtype=np.float32))


def trapezoid_ap(positions, total):
    """Area under precision/recall, one trapezoid per found positive."""
    area = 0.0
    for found, pos in enumerate(positions):
        left = 1.0 if pos == 0 else found / float(pos)
        right = (found + 1) / float(pos + 1)
        area += (left + right) / 2.0 / total
    return area


def whiten(queries, database, train):
    mean = train.mean(dim=0)
    moment = (train.t() @ train / train.shape[0]).numpy()
    values, vectors = np.linalg.eigh(moment)  # float64 inside, float32 out
    floor = values.max() * 1e-5
    values = np.where(values < floor, floor, values)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    proj = torch.from_numpy((np.diag(1.0 / values ** 0.5) @ vectors.T).astype(np.float32))
    return (proj @ (queries - mean).t()).t(), (proj @ (database - mean).t()).t()


def copydays(feature_dir, data_path):
    q = features(os.path.join(feature_dir, "queries.h5"))
    db = features(os.path.join(feature_dir, "database.h5"))
    extra = os.path.join(feature_dir, "distractors.h5")
    if os.path.exists(extra):
        db = torch.cat([db, features(extra)])
    wpath = os.path.join(feature_dir, "whitening.h5")
    if os.path.exists(wpath):
        q, db = whiten(q, db, features(wpath))
    q = torch.nn.functional.normalize(q, dim=1)
    db = torch.nn.functional.normalize(db, dim=1)
    top = (q @ db.t()).topk(min(20, db.shape[0]), dim=1).indices.tolist()
    names = {b: sorted(f for f in os.listdir(os.path.join(data_path, b)) if f.endswith(".jpg"))
             for b in BLOCKS}
    result, row, total = {}, 0, 0.0
    for b in BLOCKS:
        aps = []
        for i, qname in enumerate(names[b]):
            if b == "strong":
                good = {j for j, o in enumerate(names["original"]) if o[:4] == qname[:4]}
            else:
                good = {i}
            aps.append(trapezoid_ap([r for r, d in enumerate(top[row]) if d in good], len(good)))
            row += 1
        result[b] = sum(aps) / len(aps)
        total += sum(aps)
    return {"blocks": result, "strong": result["strong"], "all": total / row}


def revisited(feature_dir, gnd_path):
    with open(gnd_path, "rb") as f:
        cfg = pickle.load(f)
    db = torch.nn.functional.normalize(features(os.path.join(feature_dir, "database.h5")), dim=1)
    q = torch.nn.functional.normalize(features(os.path.join(feature_dir, "queries.h5")), dim=1)
    order = torch.argsort(-(db @ q.t()), dim=0).numpy()
    kappas = [1, 5, 10]

    def protocol(ok_of, junk_of):
        aps, prs = [], []
        for i, g in enumerate(cfg["gnd"]):
            ok, junk = set(ok_of(g)), set(junk_of(g))
            if not ok:
                continue
            column = order[:, i]
            ok_pos = [p for p, d in enumerate(column) if d in ok]
            junk_pos = [p for p, d in enumerate(column) if d in junk]
            lowered = [p - sum(1 for j in junk_pos if j < p) for p in ok_pos]
            aps.append(trapezoid_ap(lowered, len(ok_of(g))))
            one_based = np.array(lowered) + 1
            prs.append([(one_based <= min(one_based.max(), k)).sum() / min(one_based.max(), k)
                        for k in kappas])
        return float(np.mean(aps)), np.mean(np.array(prs), axis=0).tolist()

    mapM, mprM = protocol(lambda g: list(g["easy"]) + list(g["hard"]), lambda g: list(g["junk"]))
    mapH, mprH = protocol(lambda g: list(g["hard"]), lambda g: list(g["junk"]) + list(g["easy"]))
    return {"mapM": mapM, "mapH": mapH, "mprM": mprM, "mprH": mprH,
            "imlist": len(cfg["imlist"]), "qimlist": len(cfg["qimlist"])}


if __name__ == "__main__":
    fn = {"copydays": copydays, "revisited": revisited}[sys.argv[1]]
    print(json.dumps(fn(sys.argv[2], sys.argv[3])))
