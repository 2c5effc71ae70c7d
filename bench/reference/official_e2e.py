#!/usr/bin/python3
"""main_dino.py end to end, timed: its own train_dino on an ImageFolder (torchvision's
ImageFolder, DataAugmentationDINO on PIL, torch's DataLoader with its workers, the model, the
step, the checkpoint), the official side of bench/platform/gpu_user_run.sh (issue 62).

The official code is not part of this project (scripts/fetch_official.sh,
bench/reference/official/). Nothing of main_dino.py is re-implemented; what this file adds:
  - timing: the DataLoader that train_dino builds is wrapped on its way into MetricLogger, so each
    epoch's wall time (from asking for its first batch to the end of its last step) and the time
    the loop waited for batches are recorded, and one JSON line per epoch is printed at the end;
  - main_dino.py's --arch check asks torch.hub for the xcit repository (online): the fetched
    xcit.py answers instead (as bench/reference/official_step.py does);
  - the nano XCiTs' in-place CLS norm, which breaks an fp32 backward: normalised on a copy
    (official_step.py's clone_cls_norm_input; the same arithmetic, XCiT-S is untouched);
  - bf16, which main_dino.py does not have: its fp16 autocast casts to bfloat16 and its scaler is
    disabled (official_step.py's change);
  - without CUDA (a check of this script on a CPU): a one-process Gloo group in place of
    init_distributed_mode's NCCL one, Tensor.cuda() returning the tensor, synchronize and the
    metric all-reduce doing nothing, SyncBatchNorm kept out (official_step.py's shims).
Every flag but --precision is main_dino.py's own, parsed by its parser.

usage: python bench/reference/official_e2e.py --precision fp16|bf16|fp32 [main_dino.py flags]
  e.g. --arch xcit_small_12_p16 --batch_size_per_gpu 64 --local_crops_number 8 --epochs 2
       --data_path photos/train --output_dir /tmp/official --num_workers 10
Prints, after main_dino.py's own output, one line per epoch:
  {"impl": "official", "epoch": e, "steps": n, "seconds": s, "images_per_sec": ...,
   "data_wait_fraction": ..., "peak_allocated_mib": ... (CUDA), "max_rss_mib": ...}
"""
import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import official_step  # noqa: E402  (import_official, build_backbone: the shared harness)


class TimedLoader:
    """The DataLoader as MetricLogger.log_every sees it, with the waits for its batches timed."""

    epochs = []

    def __init__(self, loader, batch):
        self.loader, self.batch = loader, batch

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        start = time.perf_counter()
        waited, steps = 0.0, 0
        it = iter(self.loader)
        while True:
            asked = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                break
            waited += time.perf_counter() - asked
            steps += 1
            yield item
        seconds = time.perf_counter() - start
        TimedLoader.epochs.append({"steps": steps, "seconds": seconds, "waited": waited,
                                   "images": steps * self.batch})


def main():
    precision = "fp16"
    argv = sys.argv[1:]
    if "--precision" in argv:
        i = argv.index("--precision")
        precision = argv[i + 1]
        del argv[i:i + 2]
    if precision not in ("fp16", "bf16", "fp32"):
        sys.exit(f"official_e2e.py: --precision {precision} is not one of fp16, bf16, fp32")
    main_dino, utils, vits, xcit = official_step.import_official()
    import torch
    import torch.distributed as dist
    torch.hub.list = lambda repo, *a, **kw: [n for n in vars(xcit) if n.startswith("xcit_")]
    cuda = torch.cuda.is_available()

    def hub_load(repo, name, pretrained=False, **kw):
        model = official_step.clone_cls_norm_input(official_step.build_backbone(xcit, name, **kw))
        return model if cuda else official_step.plain_batchnorm(model)
    torch.hub.load = hub_load
    args = main_dino.get_args_parser().parse_args(
        argv + ["--use_fp16", "true" if precision == "fp16" else "false"])
    if precision == "bf16":
        if not cuda:
            sys.exit("official_e2e.py: --precision bf16 needs CUDA (main_dino.py's autocast)")
        args.use_fp16 = True  # its autocast and scaler, then turned into bf16 and a no-op
        amp = torch.cuda.amp
        real_scaler = amp.GradScaler
        amp.GradScaler = lambda *a, **kw: real_scaler(enabled=False)
        amp.autocast = lambda enabled=True, **kw: torch.autocast(
            "cuda", dtype=torch.bfloat16, enabled=enabled)
    if not cuda:
        torch.Tensor.cuda = lambda self, *a, **kw: self
        torch.nn.Module.cuda = lambda self, *a, **kw: self
        torch.cuda.synchronize = lambda *a, **kw: None
        utils.SmoothedValue.synchronize_between_processes = lambda self: None
        torch.nn.SyncBatchNorm.convert_sync_batchnorm = staticmethod(lambda m, *a, **kw: m)
        real_ddp = torch.nn.parallel.DistributedDataParallel

        class CpuDDP(real_ddp):  # device_ids=[args.gpu] names no device on the CPU
            def __init__(self, module, device_ids=None, **kw):
                super().__init__(module, **kw)
        torch.nn.parallel.DistributedDataParallel = CpuDDP

        def one_process_group(a):
            a.rank, a.gpu, a.world_size = 0, None, 1
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
            dist.init_process_group("gloo", rank=0, world_size=1)
        utils.init_distributed_mode = one_process_group
    real_log_every = utils.MetricLogger.log_every

    def timed_log_every(self, iterable, print_freq, header=None):
        if hasattr(iterable, "batch_size") and header and header.startswith("Epoch"):
            iterable = TimedLoader(iterable, iterable.batch_size)
        return real_log_every(self, iterable, print_freq, header)
    utils.MetricLogger.log_every = timed_log_every
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    os.makedirs(args.output_dir, exist_ok=True)  # main_dino.py's __main__ does this
    main_dino.train_dino(args)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    for epoch, e in enumerate(TimedLoader.epochs):
        out = {"impl": "official", "epoch": epoch, "steps": e["steps"],
               "seconds": round(e["seconds"], 3),
               "images_per_sec": round(e["images"] / e["seconds"], 2),
               "data_wait_fraction": round(e["waited"] / e["seconds"], 4),
               "precision": precision, "num_workers": args.num_workers,
               "max_rss_mib": own // 1024, "max_worker_rss_mib": workers // 1024}
        if cuda:
            out["peak_allocated_mib"] = torch.cuda.max_memory_allocated() // (1024 * 1024)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
