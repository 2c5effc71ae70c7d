#!/usr/bin/python3
"""Golden values for the DINOv2 options (KoLeo, Sinkhorn-Knopp centering, iBOT masked-patch loss),
made by facebookresearch/dinov2's own loss modules, mask generator and collate function.

The official code is not part of this project: this script imports it from the checkout made by
scripts/fetch_official.sh (bench/reference/official/dinov2; only dinov2/__init__.py, dinov2/loss/,
dinov2/data/masking.py and dinov2/data/collate.py are used, the last two loaded by path because
the dinov2.data package pulls in the datasets) and calls it on seeded inputs. Inputs and outputs go
to dinov2_goldens.pth (torch.save, zip format), which C++ tests read with core/pth and feed to our
implementations. "spec §n" cites the sections of the DINOv2 spec (dinov2.md: dinov2's definitions
with line references at the commit in meta); the self-check at the end asserts its §6 invariants
on what was computed, so the script fails loudly where dinov2 does not behave as the spec says.

Precision: float64 inputs wherever dinov2 keeps the input dtype (KoLeo, softmax centering and
its centre, DINOLoss.forward, iBOTPatchLoss.forward_masked, all student logits); float32 where it
casts (both sinkhorn_knopp_teacher: outputs float32 whatever the input, so their inputs are stored
as float32) and for the teacher logits of "total" (the teacher side of a step is float32 there;
student float64, the products promote to float64). masks_weight is float32 as collate makes it.
Gradients are of the recorded scalar loss (backward of it), in the dtype of their input.

Keys (every tensor is contiguous and owns its storage):
  meta        dinov2_commit (str), torch version (str)
  koleo       cases: list of {name, x (n,D) f64, loss, grad (n,D), nn (n,) i64 = the module's
              pairwise_NNs_inner on the normalised rows, distances (n,) = its pdist}, for "random"
              (6x16), "duplicate" (row 4 = row 1), "norms" (row norms 1e-4 .. 1e4); ssl: the
              meta-arch's use on student CLS tokens, {cls (2b,D) f64 crop-major, b, weight 0.1,
              per_view (2,), loss = 0.1 * sum over chunk(2), grad (2b,D)}
  dino        sk: list of {teacher_temp, n_iterations 3, logits (R,K) f32, out (R,K) f32}
              (computed in a world-1 gloo group; the self-check finds it equal without one);
              center: two steps of softmax_center_teacher then update_center on logits1, logits2
              (B_g,K) f64 at teacher_temp: probs1, probs2, center1 (centre used by step 1: the
              f32 zero buffer), center2 (used by step 2; f64, the update promotes it), center3
              (what step 3 would use, made by apply_center_update), center_momentum;
              forward: {student (S*b,K) f64 = S chunks of b rows, n_student_chunks S,
              teacher (T,b,K) f64 probabilities, loss, grad (S*b,K)}
  ibot        masks_case: the name of the collate case whose masks are used (B_g x N);
              sk: list of {teacher_temp, logits (n_masked,K) f32, n_masked_patches_in (1,) i64,
              n_masked_patches_out (the tensor after the module's all_reduce, world 1), out f32};
              forward_masked: {masks (B_g,N) bool, masks_weight (n_masked,) f32,
              student (n_masked,K) f64, teacher (n_masked,K) f64 probabilities, loss,
              grad (n_masked,K)};
              center: like dino's with the (1,n,K) shapes ssl_meta_arch passes: logits1 (n1,K),
              logits2 (n2,K) f64, probs1, probs2 (n,K), center1..3 (1,1,K)
  collate     cases: list of {name, B_g, H, W, N, mask_ratio_min, mask_ratio_max,
              mask_probability, seed (python random.seed before the call), max_num_patches,
              n_samples_masked, probs (n_samples_masked+1,) f32, requested (n_samples_masked,)
              i64 = the generator's argument in call order, row_bin (B_g,) i64 = the stratum of
              each collated row after the shuffle (-1: an empty-mask row), row_target (B_g,) i64
              (0 for those), collated_masks (B_g,N) bool, mask_indices_list (n,) i64,
              masks_weight (n,) f32, n_masked_patches (1,) i64, upperbound (int),
              global_crop_ids (B_g,) f32 = 100*view + sample, local_crop_ids (L*b,) likewise}.
              The masks come from Python's random: C++ cannot reproduce them; use them as inputs.
  masking     cases: list of {H, W, crop_size S, patch_size p, min_num_patches, max_num_patches
              (train.py's expression for S, p), min_aspect, max_aspect, seed, requested, mask
              (H,W) bool, count, blocks (n,6) i64 rows [m, delta, top, left, h, w]: each _mask
              call in order, m its max_mask_patches, delta the cells it added, the box of its
              successful try (-1s where delta == 0)}. For invariant tests only (count <=
              requested, h < H, w < W, 0 < delta <= min(m, h*w), box inside the mask).
  total       spec §4 for b = 3, L = n_local_crops = 2, K prototypes, the masks of collate case
              masks_case ("loss") and the shared head (keys b, n_local_crops, K, masks_case):
              inputs teacher_cls (B_g,K) f32 in [view0; view1] order
              (the script swaps them as ssl_meta_arch does), teacher_patch (B_g,N,K) f32,
              student_local (L*b,K), student_global (B_g,K), student_cls (B_g,D),
              student_patch (B_g,N,K) f64, teacher_temp, and, for the centering variant, the
              previous step's teacher_cls_prev (B_g,K, same order), teacher_patch_prev (n_prev,K)
              f32 (already gathered) that set the centres; variants: centering, sinkhorn_knopp,
              each {dino_targets (2,b,K) f32 (row 0 = teacher view 1), ibot_targets (n_masked,K)
              f32, dino_center (1,K), ibot_center (1,1,K) (the centres used; zeros with SK),
              local, global, koleo, ibot, total (f64 scalars: total = local + global + koleo +
              ibot, weights 1, 1, 0.1 inside koleo, 1), grad_local, grad_global, grad_cls,
              grad_patch (B_g,N,K; exactly 0 at unmasked patches) of total}
Run (from the repository root, once the checkout exists; needs python3-torch):
  /usr/bin/python3 tests/data/dinov2/make_goldens.py [bench/reference/official]
"""
import importlib.util
import math
import os
import random
import socket
import sys
import warnings

import torch
import torch.distributed as dist
import torch.nn.functional as F

official = sys.argv[1] if len(sys.argv) > 1 else "bench/reference/official"
root = os.path.join(official, "dinov2")
sys.path.insert(0, root)
torch.set_num_threads(1)
warnings.filterwarnings("ignore", message=".*CUDA is not available.*")  # KoLeo's autocast(cuda)

from dinov2.loss import DINOLoss, KoLeoLoss, iBOTPatchLoss  # noqa: E402  (official dinov2)


def load_by_path(name, rel):
    spec = importlib.util.spec_from_file_location(name, os.path.join(root, "dinov2", "data", rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


masking = load_by_path("dinov2_masking", "masking.py")
collate = load_by_path("dinov2_collate", "collate.py")

gen = torch.Generator().manual_seed(20261126)
out = {}
STUDENT_TEMP = 0.1


def keep(t):
    return t.detach().clone().contiguous()


def randn(*shape, dtype=torch.float64, scale=1.0):
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def commit():
    p = os.path.join(root, ".mirror-commit")
    if os.path.exists(p):
        return open(p).read().strip()
    import subprocess
    return subprocess.run(["git", "-C", root, "log", "-1", "--format=%h %cs"],
                          capture_output=True, text=True).stdout.strip()


# ---------------------------------------------------------------- process group (world 1)
def init_world_one():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", rank=0, world_size=1)


# ---------------------------------------------------------------- KoLeo (spec §1)
def koleo_case(name, x):
    mod = KoLeoLoss()
    x = x.clone().requires_grad_(True)
    loss = mod(x)
    loss.backward()
    with torch.no_grad():
        xn = F.normalize(x, eps=1e-8, p=2, dim=-1)
        nn_index = mod.pairwise_NNs_inner(xn.clone())
        distances = mod.pdist(xn, xn[nn_index])
    return {"name": name, "x": keep(x), "loss": keep(loss), "grad": keep(x.grad),
            "nn": keep(nn_index), "distances": keep(distances)}


def make_koleo():
    n, d = 6, 16
    x = randn(n, d)
    dup = randn(n, d)
    dup[4] = dup[1]
    norms = randn(n, d) * torch.logspace(-4, 4, n, dtype=torch.float64).unsqueeze(1)
    cases = [koleo_case("random", x), koleo_case("duplicate", dup), koleo_case("norms", norms)]
    b = 3
    cls = randn(2 * b, d).requires_grad_(True)
    mod = KoLeoLoss()
    per_view = [mod(p) for p in cls.chunk(2)]  # ssl_meta_arch: per view chunk, summed, x 0.1
    loss = 0.1 * sum(per_view)
    loss.backward()
    out["koleo"] = {"cases": cases, "ssl": {
        "cls": keep(cls), "b": b, "weight": 0.1, "per_view": keep(torch.stack(per_view)),
        "loss": keep(loss), "grad": keep(cls.grad)}}


# ---------------------------------------------------------------- DINO (spec §2, §4)
def make_dino():
    r, k = 8, 10
    sk = []
    for temp in (0.04, 0.07):
        logits = randn(r, k, dtype=torch.float32, scale=0.5)
        res = DINOLoss(k).sinkhorn_knopp_teacher(logits.clone(), teacher_temp=temp)
        sk.append({"teacher_temp": temp, "n_iterations": 3, "logits": keep(logits),
                   "out": keep(res)})

    b, temp = 3, 0.05
    mod = DINOLoss(k)
    logits1, logits2 = randn(2 * b, k, scale=0.5), randn(2 * b, k, scale=0.5) + 0.3
    center1 = keep(mod.center)
    probs1 = mod.softmax_center_teacher(logits1, teacher_temp=temp)
    mod.update_center(logits1)
    probs2 = mod.softmax_center_teacher(logits2, teacher_temp=temp)
    center2 = keep(mod.center)
    mod.update_center(logits2)
    mod.apply_center_update()
    center = {"teacher_temp": temp, "center_momentum": mod.center_momentum,
              "logits1": keep(logits1), "logits2": keep(logits2), "probs1": keep(probs1),
              "probs2": keep(probs2), "center1": center1, "center2": center2,
              "center3": keep(mod.center)}

    n_s, n_t = 3, 2
    student = randn(n_s * b, k, scale=0.7).requires_grad_(True)
    teacher = F.softmax(randn(n_t, b, k, scale=0.5) / 0.04, dim=-1)
    loss = DINOLoss(k)(student.chunk(n_s), teacher)
    loss.backward()
    forward = {"student": keep(student), "n_student_chunks": n_s, "teacher": keep(teacher),
               "loss": keep(loss), "grad": keep(student.grad)}
    out["dino"] = {"sk": sk, "center": center, "forward": forward}


# ---------------------------------------------------------------- masks (spec §3.1, §3.2)
class RecordingRandom:
    """Stands in for the `random` module inside masking.py and collate.py: every draw comes from
    Python's global random, unchanged; randint's bounds and shuffle's permutation are recorded."""

    def __init__(self):
        self.randint_log = []
        self.permutations = []

    def uniform(self, a, b):
        return random.uniform(a, b)

    def randint(self, a, b):
        v = random.randint(a, b)
        self.randint_log.append((a, b, v))
        return v

    def shuffle(self, x):
        idx = list(range(len(x)))
        random.shuffle(idx)  # the same draws as shuffling x itself: they depend on len only
        x[:] = [x[i] for i in idx]
        self.permutations.append(idx)


recorder = RecordingRandom()
masking.random = recorder
collate.random = recorder


def train_max_num_patches(crop_size, patch_size):
    return 0.5 * crop_size // patch_size * crop_size // patch_size  # train.py's expression


def recording_generator(grid, crop_size, patch_size):
    g = masking.MaskingGenerator(input_size=(grid, grid),
                                 max_num_patches=train_max_num_patches(crop_size, patch_size))
    g.blocks = []
    official_mask = g._mask

    def _mask(mask, max_mask_patches):
        start = len(recorder.randint_log)
        delta = official_mask(mask, max_mask_patches)
        row = [int(max_mask_patches), int(delta), -1, -1, -1, -1]
        if delta > 0:  # the successful try drew top then left last
            (_, hi_top, top), (_, hi_left, left) = recorder.randint_log[-2:]
            assert len(recorder.randint_log) - start >= 2
            row[2:] = [top, left, g.height - hi_top, g.width - hi_left]
        g.blocks.append(row)
        return delta

    g._mask = _mask
    return g


def make_masking():
    cases = []
    for grid, crop, patch, requests in ((7, 112, 16, (5, 12, 24)),
                                        (14, 224, 16, (20, 59, 98, 150))):
        for seed in (1, 2, 3):
            for req in requests:
                g = recording_generator(grid, crop, patch)
                random.seed(seed * 1000 + req)
                mask = g(req)
                cases.append({
                    "H": g.height, "W": g.width, "crop_size": crop, "patch_size": patch,
                    "min_num_patches": g.min_num_patches,
                    "max_num_patches": float(g.max_num_patches),
                    "min_aspect": math.exp(g.log_aspect_ratio[0]),
                    "max_aspect": math.exp(g.log_aspect_ratio[1]),
                    "seed": seed * 1000 + req, "requested": req,
                    "mask": torch.from_numpy(mask.copy()), "count": int(mask.sum()),
                    "blocks": torch.tensor(g.blocks, dtype=torch.int64).reshape(-1, 6)})
    out["masking"] = {"cases": cases}


def collate_case(name, b, n_local, grid, crop, patch, ratio, probability, seed):
    samples = [({"global_crops": [torch.tensor([100.0 * v + s]) for v in range(2)],
                 "local_crops": [torch.tensor([100.0 * v + s]) for v in range(n_local)]}, None)
               for s in range(b)]
    g = recording_generator(grid, crop, patch)
    requested = []

    def mask_generator(n=0):
        requested.append(n)
        return g(n)

    random.seed(seed)
    del recorder.permutations[:]
    res = collate.collate_data_and_cast(samples, mask_ratio_tuple=ratio,
                                        mask_probability=probability, dtype=torch.float32,
                                        n_tokens=grid * grid, mask_generator=mask_generator)
    (perm,) = recorder.permutations
    n_masked_samples = int(2 * b * probability)
    row_bin = [p if p < n_masked_samples else -1 for p in perm]
    return {
        "name": name, "B_g": 2 * b, "H": grid, "W": grid, "N": grid * grid,
        "mask_ratio_min": float(ratio[0]), "mask_ratio_max": float(ratio[1]),
        "mask_probability": probability, "seed": seed,
        "max_num_patches": float(g.max_num_patches), "n_samples_masked": n_masked_samples,
        "probs": torch.linspace(*ratio, n_masked_samples + 1),  # as collate makes it
        "requested": torch.tensor(requested[:n_masked_samples], dtype=torch.int64),
        "row_bin": torch.tensor(row_bin, dtype=torch.int64),
        "row_target": torch.tensor([requested[p] for p in perm], dtype=torch.int64),  # 0: empty
        "collated_masks": keep(res["collated_masks"]),
        "mask_indices_list": keep(res["mask_indices_list"]),
        "masks_weight": keep(res["masks_weight"]),
        "n_masked_patches": keep(res["n_masked_patches"]),
        "upperbound": int(res["upperbound"]),
        "global_crop_ids": keep(res["collated_global_crops"].flatten()),
        "local_crop_ids": keep(res["collated_local_crops"].flatten()),
    }


def make_collate():
    out["collate"] = {"cases": [
        collate_case("loss", 3, 2, 6, 96, 16, (0.1, 0.5), 0.5, 7),
        collate_case("p16_224", 4, 2, 14, 224, 16, (0.1, 0.5), 0.5, 11),
        collate_case("odd", 3, 1, 7, 112, 16, (0.2, 0.6), 0.3, 5),  # int(6 * 0.3) = 1
    ]}


def collate_by_name(name):
    return next(c for c in out["collate"]["cases"] if c["name"] == name)


# ---------------------------------------------------------------- iBOT (spec §2, §3.4)
def make_ibot():
    case = collate_by_name("loss")
    masks, weight = case["collated_masks"], case["masks_weight"]
    n, k = int(masks.sum()), 10
    sk = []
    for temp in (0.04, 0.07):
        logits = randn(n, k, dtype=torch.float32, scale=0.5)
        n_in = case["n_masked_patches"].clone()
        n_arg = n_in.clone()
        res = iBOTPatchLoss(k).sinkhorn_knopp_teacher(logits.clone(), teacher_temp=temp,
                                                       n_masked_patches_tensor=n_arg)
        sk.append({"teacher_temp": temp, "n_iterations": 3, "logits": keep(logits),
                   "n_masked_patches_in": n_in, "n_masked_patches_out": keep(n_arg),
                   "out": keep(res)})

    student = randn(n, k, scale=0.7).requires_grad_(True)
    teacher = F.softmax(randn(n, k, scale=0.5) / 0.04, dim=-1)
    loss = iBOTPatchLoss(k).forward_masked(student, teacher, student_masks_flat=masks,
                                           n_masked_patches=n, masks_weight=weight)
    loss.backward()
    forward_masked = {"masks": keep(masks), "masks_weight": keep(weight),
                      "student": keep(student), "teacher": keep(teacher), "loss": keep(loss),
                      "grad": keep(student.grad)}

    temp = 0.05
    mod = iBOTPatchLoss(k)
    logits1, logits2 = randn(n, k, scale=0.5), randn(n - 5, k, scale=0.5) - 0.2
    center1 = keep(mod.center)
    probs1 = mod.softmax_center_teacher(logits1.unsqueeze(0), teacher_temp=temp).squeeze(0)
    mod.update_center(logits1.unsqueeze(0))  # ssl_meta_arch passes (1, n, K)
    probs2 = mod.softmax_center_teacher(logits2.unsqueeze(0), teacher_temp=temp).squeeze(0)
    center2 = keep(mod.center)
    mod.update_center(logits2.unsqueeze(0))
    mod.apply_center_update()
    center = {"teacher_temp": temp, "center_momentum": mod.center_momentum,
              "logits1": keep(logits1), "logits2": keep(logits2), "probs1": keep(probs1),
              "probs2": keep(probs2), "center1": center1, "center2": center2,
              "center3": keep(mod.center)}
    out["ibot"] = {"masks_case": "loss", "sk": sk, "forward_masked": forward_masked,
                   "center": center}


# ---------------------------------------------------------------- total (spec §4)
def total_variant(inp, centering, case):
    n_local, k, temp = inp["n_local_crops"], inp["K"], inp["teacher_temp"]
    masks, idx = case["collated_masks"], case["mask_indices_list"]
    n_masked = idx.shape[0]
    dino_loss, ibot_loss, koleo = DINOLoss(k), iBOTPatchLoss(k), KoLeoLoss()

    def teacher(cls, patch_masked):
        swapped = torch.cat(cls.chunk(2)[::-1])  # [view1; view0], as ssl_meta_arch stores it
        if centering == "centering":
            dino_t = dino_loss.softmax_center_teacher(swapped, teacher_temp=temp).view(2, -1, k)
            dino_loss.update_center(swapped)
            pm, n = patch_masked.unsqueeze(0), patch_masked.shape[0]
            ibot_t = ibot_loss.softmax_center_teacher(pm[:, :n], teacher_temp=temp).squeeze(0)
            ibot_loss.update_center(pm[:n])  # as ssl_meta_arch: slices dim 0 of (1, n, K)
        else:
            dino_t = dino_loss.sinkhorn_knopp_teacher(swapped, teacher_temp=temp).view(2, -1, k)
            ibot_t = ibot_loss.sinkhorn_knopp_teacher(
                patch_masked, teacher_temp=temp,
                n_masked_patches_tensor=case["n_masked_patches"].clone())
        return dino_t, ibot_t

    res = {}
    if centering == "centering":  # a previous step sets both centres
        teacher(inp["teacher_cls_prev"], inp["teacher_patch_prev"])
        dino_loss.apply_center_update()
        ibot_loss.apply_center_update()
        res["dino_center"], res["ibot_center"] = keep(dino_loss.center), keep(ibot_loss.center)
    with torch.no_grad():
        t_patch = torch.index_select(inp["teacher_patch"].flatten(0, 1), 0, idx)
    dino_t, ibot_t = teacher(inp["teacher_cls"], t_patch)
    if centering != "centering":
        res["dino_center"], res["ibot_center"] = keep(dino_loss.center), keep(ibot_loss.center)

    s_local = inp["student_local"].clone().requires_grad_(True)
    s_global = inp["student_global"].clone().requires_grad_(True)
    s_cls = inp["student_cls"].clone().requires_grad_(True)
    s_patch = inp["student_patch"].clone().requires_grad_(True)
    s_patch_masked = torch.index_select(s_patch.flatten(0, 1), 0, idx)
    n_terms = 2 + max(2 * n_local, 1)
    local = dino_loss(s_local.chunk(n_local), dino_t) / n_terms
    glob = dino_loss([s_global], [dino_t.flatten(0, 1)]) * 2 / n_terms
    kol = 0.1 * sum(koleo(p) for p in s_cls.chunk(2))
    ibot = ibot_loss.forward_masked(s_patch_masked, ibot_t, student_masks_flat=masks,
                                    n_masked_patches=n_masked,
                                    masks_weight=case["masks_weight"]) * 2 * (1.0 / 2)
    total = 1.0 * local + 1.0 * glob + kol + 1.0 * ibot
    total.backward()
    res.update({"dino_targets": keep(dino_t), "ibot_targets": keep(ibot_t),
                "local": keep(local), "global": keep(glob), "koleo": keep(kol),
                "ibot": keep(ibot), "total": keep(total), "grad_local": keep(s_local.grad),
                "grad_global": keep(s_global.grad), "grad_cls": keep(s_cls.grad),
                "grad_patch": keep(s_patch.grad)})
    return res


def make_total():
    case = collate_by_name("loss")
    b, n_local, k, d, n = 3, 2, 10, 16, case["N"]
    n_prev = int(case["n_masked_patches"]) - 3
    inp = {"b": b, "n_local_crops": n_local, "K": k, "teacher_temp": 0.055,
           "masks_case": "loss",
           "teacher_cls": randn(2 * b, k, dtype=torch.float32, scale=0.5),
           "teacher_patch": randn(2 * b, n, k, dtype=torch.float32, scale=0.5),
           "teacher_cls_prev": randn(2 * b, k, dtype=torch.float32, scale=0.5) + 0.2,
           "teacher_patch_prev": randn(n_prev, k, dtype=torch.float32, scale=0.5) - 0.1,
           "student_local": randn(n_local * b, k, scale=0.7),
           "student_global": randn(2 * b, k, scale=0.7),
           "student_cls": randn(2 * b, d),
           "student_patch": randn(2 * b, n, k, scale=0.7)}
    out["total"] = dict(inp, centering=total_variant(inp, "centering", case),
                        sinkhorn_knopp=total_variant(inp, "sinkhorn_knopp", case))


# ---------------------------------------------------------------- self-check (spec §6)
def close(a, b, tol, what, relative=False):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    diff = a - b
    if relative:
        diff = diff / b.abs().clamp(min=1e-300)
    err = diff.abs().max().item() if diff.numel() else 0.0
    assert err <= tol, "%s: max |diff| %.3g > %.3g" % (what, err, tol)
    return err


def self_check(dino_sk_without_group):
    # Sinkhorn-Knopp (§2, §6)
    for c, ref in zip(out["dino"]["sk"], dino_sk_without_group):
        q, t = c["out"], c["teacher_temp"]
        assert q.dtype == torch.float32 and (q > 0).all()
        close(q.sum(1), 1.0, 1e-6, "DINO SK rows sum to 1")
        close(q, ref, 0.0, "DINO SK is the same with and without a world-1 process group")
        perm = torch.randperm(q.shape[0], generator=gen)
        close(DINOLoss(10).sinkhorn_knopp_teacher(c["logits"][perm], t), q[perm], 1e-6,
              "DINO SK row permutation")
        close(DINOLoss(10).sinkhorn_knopp_teacher(c["logits"] + 0.3, t), q, 5e-7,
              "DINO SK constant shift")
        ib = iBOTPatchLoss(10).sinkhorn_knopp_teacher(
            c["logits"], t, n_masked_patches_tensor=torch.tensor([q.shape[0]]))
        close(ib, q, 0.0, "iBOT SK with B_sk = R equals DINO SK")
    for c in out["ibot"]["sk"]:
        assert (c["out"] > 0).all()
        close(c["out"].sum(1), 1.0, 1e-6, "iBOT SK rows sum to 1")
        assert torch.equal(c["n_masked_patches_out"], c["n_masked_patches_in"])  # world 1
    overflow = torch.zeros(4, 5)
    overflow[0, 0] = 4.0  # 4 / 0.04 = 100 > 88.7: exp overflows float32
    assert torch.isnan(DINOLoss(5).sinkhorn_knopp_teacher(overflow, 0.04)).any()

    # KoLeo (§1, §6)
    mod = KoLeoLoss()
    for c in out["koleo"]["cases"]:
        x = c["x"]
        xn = x / x.norm(dim=1, keepdim=True).clamp(min=1e-8)
        d = (xn - xn[c["nn"]] + 1e-8).norm(dim=1)
        close(c["distances"], d, 1e-15, "KoLeo pdist adds eps to each element")
        close(c["loss"], -torch.log(d + 1e-8).mean(), 1e-12, "KoLeo formula")
        dots = xn @ xn.t()
        dots.fill_diagonal_(-1)
        assert torch.equal(dots.argmax(1), c["nn"])
        scale = torch.rand(x.shape[0], 1, generator=gen, dtype=torch.float64) * 5 + 0.1
        close(mod(x * scale), c["loss"], 1e-6, "KoLeo per-row scaling")
        perm = torch.randperm(x.shape[0], generator=gen)
        close(mod(x[perm]), c["loss"], 1e-12, "KoLeo row permutation")
        q, _ = torch.linalg.qr(torch.randn(x.shape[1], x.shape[1], generator=gen,
                                           dtype=torch.float64))
        close(mod(x @ q), c["loss"], 1e-6, "KoLeo orthogonal map")
        assert torch.isfinite(c["grad"]).all()
    dup = next(c for c in out["koleo"]["cases"] if c["name"] == "duplicate")
    assert int(dup["nn"][4]) == 1 and int(dup["nn"][1]) == 4
    close(dup["distances"][[1, 4]], 1e-8 * math.sqrt(dup["x"].shape[1]), 1e-20,
          "KoLeo duplicated row: d = 1e-8 sqrt(D)")
    assert dup["loss"] > 5.0
    s = out["koleo"]["ssl"]
    close(s["loss"], 0.1 * (mod(s["cls"][:3]) + mod(s["cls"][3:])), 1e-15, "KoLeo per view")

    # centres (§2): deferred EMA
    for name, c in (("DINO", out["dino"]["center"]), ("iBOT", out["ibot"]["center"])):
        m = c["center_momentum"]
        close(c["center1"], 0.0, 0.0, name + " centre starts at 0")
        close(c["center2"].flatten(), m * c["center1"].flatten() +
              (1 - m) * c["logits1"].mean(0), 1e-15, name + " centre after step 1")
        close(c["center3"].flatten(), m * c["center2"].flatten() +
              (1 - m) * c["logits2"].mean(0), 1e-15, name + " centre after step 2")
        close(c["probs2"], F.softmax((c["logits2"] - c["center2"].flatten()) /
                                     c["teacher_temp"], dim=-1), 1e-12, name + " softmax")
    fw = out["dino"]["forward"]
    lsm = F.log_softmax(fw["student"] / STUDENT_TEMP, -1).view(fw["n_student_chunks"], 1, -1, 10)
    close(fw["loss"], -(fw["teacher"].unsqueeze(0) * lsm).sum(-1).mean(-1).sum(), 1e-12,
          "DINOLoss.forward: a plain sum over the pairs")

    # masks (§3.1, §3.2)
    for c in out["masking"]["cases"]:
        h_grid, w_grid, mask = c["H"], c["W"], c["mask"]
        assert c["count"] <= c["requested"]
        done = 0
        for m, delta, top, left, h, w in c["blocks"].tolist():
            assert m == min(c["requested"] - done, c["max_num_patches"])
            if delta == 0:
                break
            assert 0 < delta <= min(m, h * w) and h < h_grid and w < w_grid
            assert 0 <= top <= h_grid - h and 0 <= left <= w_grid - w
            assert mask[top:top + h, left:left + w].all()
            done += delta
        assert done == c["count"]
    for c in out["collate"]["cases"]:
        masks, n = c["collated_masks"], c["N"]
        counts = masks.sum(1)
        assert masks.shape == (c["B_g"], n) and c["probs"].dtype == torch.float32
        assert int((counts > 0).sum()) == c["n_samples_masked"]  # true for these seeds only
        assert torch.equal(c["mask_indices_list"], masks.flatten().nonzero().flatten())
        assert int(c["n_masked_patches"]) == c["mask_indices_list"].numel()
        close(c["masks_weight"], (1.0 / counts.clamp(min=1).double()).repeat_interleave(counts),
              1e-7, "masks_weight = 1/n_i")
        close(c["masks_weight"].sum(), int((counts > 0).sum()), 1e-5, "masks_weight sum")
        assert (counts <= c["row_target"]).all()
        assert (counts[c["row_bin"] < 0] == 0).all()
        p = c["probs"]
        for r in range(c["B_g"]):
            i = int(c["row_bin"][r])
            if i >= 0:
                assert int(n * p[i]) <= int(c["row_target"][r]) <= int(n * p[i + 1])
        assert c["upperbound"] == sum(int(n * p[i + 1]) for i in range(c["n_samples_masked"]))
        assert c["upperbound"] >= int(c["n_masked_patches"])
        b = c["B_g"] // 2
        ids = torch.tensor([100.0 * v + s for v in range(2) for s in range(b)])
        assert torch.equal(c["global_crop_ids"], ids)  # crop-major rows

    # iBOT loss (§3.4, §6)
    fm = out["ibot"]["forward_masked"]
    masks = fm["masks"]
    counts = masks.sum(1)
    per_patch = (fm["teacher"] * F.log_softmax(fm["student"] / STUDENT_TEMP, -1)).sum(-1)
    owner = torch.arange(masks.shape[0]).repeat_interleave(counts)
    close(fm["loss"], -(per_patch / counts[owner]).sum() / masks.shape[0], 2e-7,
          "iBOT formula (masks_weight is float32)", relative=True)
    mod = iBOTPatchLoss(10)
    close(mod.forward_masked(fm["student"], fm["teacher"], masks), fm["loss"], 1e-7,
          "forward_masked without masks_weight")
    dense_s = torch.randn(*masks.shape, 10, generator=gen, dtype=torch.float64)
    dense_t = torch.softmax(torch.randn(*masks.shape, 10, generator=gen, dtype=torch.float64), -1)
    dense_s[masks], dense_t[masks] = fm["student"], fm["teacher"]
    close(mod.forward(dense_s, dense_t, masks), fm["loss"], 2e-7, "dense forward (float64 weights)",
          relative=True)

    # total (§4, §6)
    tot = out["total"]
    case = collate_by_name("loss")
    masks = case["collated_masks"]
    b, n_local = tot["b"], tot["n_local_crops"]
    for name in ("centering", "sinkhorn_knopp"):
        v = tot[name]
        close(v["total"], v["local"] + v["global"] + v["koleo"] + v["ibot"], 1e-12,
              name + ": total is the sum of the terms")
        assert (v["grad_patch"][~masks] == 0).all(), name + ": unmasked patches get no gradient"
        # DINO part = v1: mean over (teacher view q, student crop v != q) pairs
        teacher_views = [v["dino_targets"][1], v["dino_targets"][0]]  # undo the swap
        crops = list(tot["student_global"].chunk(2)) + list(tot["student_local"].chunk(n_local))
        ces = [-(teacher_views[q] * F.log_softmax(s / STUDENT_TEMP, -1)).sum(-1).mean()
               for q in range(2) for vi, s in enumerate(crops) if vi != q]
        close(v["local"] + v["global"], sum(ces) / len(ces), 1e-12, name + ": v1 DINO mean")
        if name == "sinkhorn_knopp":
            close(v["dino_center"], 0.0, 0.0, "SK leaves the DINO centre at 0")
            close(v["ibot_center"], 0.0, 0.0, "SK leaves the iBOT centre at 0")
            close(v["dino_targets"].sum(-1), 1.0, 1e-6, "SK DINO targets rows sum to 1")
        else:
            close(v["dino_center"].flatten(), 0.1 * tot["teacher_cls_prev"].double().mean(0),
                  1e-7, "DINO centre after one step")
            close(v["ibot_center"].flatten(), 0.1 * tot["teacher_patch_prev"].double().mean(0),
                  1e-7, "iBOT centre after one step")


if __name__ == "__main__":
    out["meta"] = {"dinov2_commit": commit(), "torch": torch.__version__}
    make_koleo()
    init_world_one()  # iBOT's SK all-reduces unconditionally
    try:
        make_dino()
        dist.destroy_process_group()  # DINO's SK must give the same without a group
        dino_sk_without_group = [
            DINOLoss(10).sinkhorn_knopp_teacher(c["logits"].clone(), c["teacher_temp"])
            for c in out["dino"]["sk"]]
        init_world_one()
        make_masking()
        make_collate()
        make_ibot()
        make_total()
        self_check(dino_sk_without_group)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dinov2_goldens.pth")
    torch.save(out, path)
    print("wrote", path, os.path.getsize(path), "bytes")
