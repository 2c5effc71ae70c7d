#!/usr/bin/python3
"""The official k-NN algorithm of eval_knn.py (knn_classifier), timed in PyTorch.

Written here from the algorithm's description (eval_knn.py's knn_classifier): chunks of
N_test // 100 queries, similarity = features @ train.T, topk(k) sorted, one-hot labels
weighted by exp(sim / T), summed per class (1000 classes, as eval_knn.py hard-codes),
classes sorted by score; top-1 / top-5 (first min(5, k) classes).

usage:
  bench_knn_official.py --load DIR [--threads 2]          # DIR/train.h5, DIR/test.h5
  bench_knn_official.py --train 1281167 --test 50000 --dim 384 --classes 1000 \
                        --queries 1000 [--threads 2]      # random clustered data; time the
                                                          # first Q queries, extrapolate
Run with Debian's /usr/bin/python3 (torch 1.13, h5py). The other side of bench/cpp/bench_knn.cpp,
on the files its --dump writes (bench/results/knn.md).
"""
import argparse
import time

import torch


def official_knn(train, train_labels, test, test_labels, k, T, num_classes, chunk, limit):
    top1 = top5 = total = 0
    train_t = train.t()
    one_hot = torch.zeros(chunk * k, num_classes)
    for start in range(0, limit, chunk):
        feats = test[start:min(start + chunk, limit)]
        targets = test_labels[start:min(start + chunk, limit)]
        b = targets.shape[0]
        sims, idx = torch.mm(feats, train_t).topk(k, largest=True, sorted=True)
        neighbours = torch.gather(train_labels.view(1, -1).expand(b, -1), 1, idx)
        one_hot.resize_(b * k, num_classes).zero_()
        one_hot.scatter_(1, neighbours.view(-1, 1), 1)
        weights = sims.clone().div_(T).exp_()
        scores = (one_hot.view(b, -1, num_classes) * weights.view(b, -1, 1)).sum(1)
        _, ranked = scores.sort(1, True)
        hit = ranked.eq(targets.view(-1, 1))
        top1 += hit[:, :1].sum().item()
        top5 += hit[:, :min(5, k)].sum().item()
        total += b
    return 100.0 * top1 / total, 100.0 * top5 / total


def clustered(n, dim, classes, means, noise, gen):
    y = torch.randint(classes, (n,), generator=gen)
    x = means[y] + noise * torch.randn(n, dim, generator=gen) / dim ** 0.5
    return torch.nn.functional.normalize(x, dim=1), y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--load")
    ap.add_argument("--train", type=int, default=60000)
    ap.add_argument("--test", type=int, default=10000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--queries", type=int, default=-1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--noise", type=float, default=5.0)
    ap.add_argument("--nb_knn", type=int, nargs="+", default=[10, 20, 100, 200])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    if args.load:
        import h5py
        with h5py.File(f"{args.load}/train.h5", "r") as f:
            train, ytrain = torch.from_numpy(f["features"][()]), torch.from_numpy(f["labels"][()])
        with h5py.File(f"{args.load}/test.h5", "r") as f:
            test, ytest = torch.from_numpy(f["features"][()]), torch.from_numpy(f["labels"][()])
    else:
        gen = torch.Generator().manual_seed(0)
        means = torch.nn.functional.normalize(torch.randn(args.classes, args.dim, generator=gen), dim=1)
        train, ytrain = clustered(args.train, args.dim, args.classes, means, args.noise, gen)
        test, ytest = clustered(args.test, args.dim, args.classes, means, args.noise, gen)
    m = test.shape[0]
    limit = m if args.queries < 0 else min(args.queries, m)
    chunk = max(1, m // 100)  # eval_knn.py's chunk size, from the full test set
    print(f"train {tuple(train.shape)}, test {m} (timed: {limit}), chunk {chunk}, "
          f"{args.threads} threads, torch {torch.__version__}")
    t0, c0 = time.perf_counter(), time.process_time()
    results = [(k, official_knn(train, ytrain, test, ytest, k, 0.07, 1000, chunk, limit))
               for k in args.nb_knn]
    s, cpu = time.perf_counter() - t0, time.process_time() - c0
    line = f"official (torch 1.13)        wall {s:9.2f} s  cpu {cpu:9.2f} s  for {limit} queries"
    if limit < m:
        line += f"  -> wall {s * m / limit:.1f} s, cpu {cpu * m / limit:.1f} s extrapolated to {m}"
    print(line)
    for k, (t1, t5) in results:
        print(f"    {k}-NN  top1 {t1:.4f}  top5 {t5:.4f}")


if __name__ == "__main__":
    main()
