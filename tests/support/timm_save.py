"""Weights that timm itself writes, for `dino` to read (tests/cli/test_export.cpp).

  timm_save.py ARCHITECTURE FOLDER [OFFICIAL_PTH]
Creates timm's ARCHITECTURE with random weights (seed 0, no classifier: num_classes 0) and
saves it as the Hugging Face hub holds timm models: FOLDER/model.safetensors and
FOLDER/config.json (timm.models.save_for_hf). With OFFICIAL_PTH, also writes the same weights
in the official DINO/XCiT layout with torch.save, renamed here as the reverse of timm's XCiT
checkpoint_filter_fn (pos_embed. is pos_embeder., each class-attention block's q, k and v are
one qkv); other families share the official names.
"""
import sys

import timm
import torch

architecture, folder = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = timm.create_model(architecture, pretrained=False, num_classes=0)
timm.models.save_for_hf(model, folder, safe_serialization=True)
if len(sys.argv) > 3:
    state = model.state_dict()
    official = {}
    for name, tensor in state.items():
        if name.startswith("pos_embed."):
            official["pos_embeder." + name[len("pos_embed."):]] = tensor
        elif ".attn.q." in name:
            parts = [state[name.replace(".attn.q.", f".attn.{x}.")] for x in "qkv"]
            official[name.replace(".attn.q.", ".attn.qkv.")] = torch.cat(parts)
        elif ".attn.k." in name or ".attn.v." in name:
            continue
        else:
            official[name] = tensor
    torch.save(official, sys.argv[3])
