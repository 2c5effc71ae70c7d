"""The README's ONNX lines ("Taking the weights elsewhere"), run once against ONNX Runtime.

  python onnx_check.py EXPORT_DIR [IMAGES...]
EXPORT_DIR is a `dino export --format timm` folder. Runs the README's three lines (timm loads
the folder, torch.onnx.export writes model.onnx with a dynamic batch) into a temporary folder,
then feeds the same batch to timm's model and to an onnxruntime InferenceSession (CPU) and
prints the largest difference between the two feature sets, the batch size and the file size.
IMAGES are preprocessed as DINO's evaluations do (Resize(size * 256 / 224, bicubic),
CenterCrop, Normalize with config.json's mean and std); without any, a seeded random batch of 4.
Needs timm and onnx + onnxruntime from the package index (not Debian): a virtual environment
with --system-site-packages over Debian's python3-torch works.
"""
import json
import os
import sys
import tempfile

import numpy as np
import onnxruntime
import timm
import torch
from PIL import Image
from torchvision import transforms

folder, images = sys.argv[1], sys.argv[2:]
config = json.load(open(os.path.join(folder, "config.json")))
cfg = config["pretrained_cfg"]
channels, size = cfg["input_size"][0], cfg["input_size"][1]
with tempfile.TemporaryDirectory() as tmp:
    onnx_path = os.path.join(tmp, "model.onnx")
    # --- the README's lines ---
    model = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    torch.onnx.export(model, torch.randn(1, channels, size, size), onnx_path,
                      input_names=["images"], output_names=["features"],
                      dynamic_axes={"images": {0: "batch"}}, opset_version=17)
    # --- the check ---
    if images:
        transform = transforms.Compose([
            transforms.Resize(int(size * 256 / 224),
                              interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop(size), transforms.ToTensor(),
            transforms.Normalize(cfg["mean"], cfg["std"])])
        batch = torch.stack([transform(Image.open(p).convert("RGB")) for p in images])
    else:
        batch = torch.randn(4, channels, size, size, generator=torch.Generator().manual_seed(0))
    session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"images": batch.numpy()})[0]
    with torch.no_grad():
        ours = model(batch).numpy()
    print(json.dumps({
        "architecture": config["architecture"],
        "batch": int(batch.shape[0]), "feature_dim": int(ours.shape[1]),
        "onnx_bytes": os.path.getsize(onnx_path), "onnxruntime": onnxruntime.__version__,
        "max_difference": float(np.abs(theirs - ours).max())}))
