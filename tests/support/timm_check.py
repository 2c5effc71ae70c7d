"""What timm makes of a `dino export --format timm` folder (tests/cli/test_export.cpp).

  timm_check.py FOLDER FEATURES_H5 IMAGES...
Loads FOLDER with timm.create_model("local-dir:FOLDER", pretrained=True) (timm loads strictly:
a missing or unexpected key is an error) and model.safetensors with safetensors.torch.load_file,
runs the model on IMAGES preprocessed as DINO's evaluations preprocess them (Resize(size *
256 / 224, bicubic), CenterCrop(size), ToTensor, Normalize with config.json's mean and std), and
prints one JSON line: the file's keys against the model's, and the largest difference between
timm's L2-normalised features and those `dino features` wrote to FEATURES_H5 for the same images.
"""
import json
import sys

import h5py
import numpy as np
import safetensors.torch
import timm
import torch
from PIL import Image
from torchvision import transforms

folder, features_h5, images = sys.argv[1], sys.argv[2], sys.argv[3:]
config = json.load(open(f"{folder}/config.json"))
model = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
stored = safetensors.torch.load_file(f"{folder}/model.safetensors")
model_keys = set(model.state_dict().keys())
cfg = config["pretrained_cfg"]
size = cfg["input_size"][1]
transform = transforms.Compose([
    transforms.Resize(int(size * 256 / 224), interpolation=transforms.InterpolationMode.BICUBIC),
    transforms.CenterCrop(size),
    transforms.ToTensor(),
    transforms.Normalize(cfg["mean"], cfg["std"]),
])
with h5py.File(features_h5, "r") as f:
    ours = np.asarray(f["features"])
    paths = [p.decode() if isinstance(p, bytes) else p for p in f["paths"]]
# The file stores paths as the dataset lists them (relative to its root): match by suffix.
order = [next(i for i, stored in enumerate(paths) if p.endswith("/" + stored.lstrip("/")))
         for p in images]
batch = torch.stack([transform(Image.open(p).convert("RGB")) for p in images])
with torch.no_grad():
    theirs = torch.nn.functional.normalize(model(batch), dim=1).numpy()
print(json.dumps({
    "architecture": config["architecture"],
    "missing": sorted(model_keys - set(stored)),
    "unexpected": sorted(set(stored) - model_keys),
    "max_difference": float(np.abs(theirs - ours[order]).max()),
    "feature_dim": int(theirs.shape[1]),
}))
