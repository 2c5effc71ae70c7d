#!/bin/bash
# Fetches the official code that the benchmarks time and the golden generators call into
# bench/reference/official/ (beside bench/reference/'s scripts, which import it; git ignores it):
# facebookresearch/dino, facebookresearch/xcit, timm 0.4.9 (the release xcit.py was written against)
# and davisvideochallenge/davis2017-evaluation (J&F, for
# tests/data/eval_goldens/make_official_goldens.py). It is never part of this project. Also installs
# python3-torchvision, -opencv and -tqdm, which the official scripts import.
#   scripts/fetch_official.sh            # needs network access to github.com
set -euo pipefail
cd "$(dirname "$0")/.."
dest=bench/reference/official
mkdir -p "$dest"
fetch() {  # fetch <url> <folder> [<tag>]
  if [ -d "$dest/$2/.git" ]; then echo "$dest/$2: present"; return; fi
  rm -rf "$dest/$2"
  git clone --quiet --depth 1 ${3:+--branch "$3"} "$1" "$dest/$2"
  echo "$dest/$2: $(git -C "$dest/$2" log -1 --format='%h %cs')"
}
fetch https://github.com/facebookresearch/dino dino
fetch https://github.com/facebookresearch/xcit xcit
fetch https://github.com/huggingface/pytorch-image-models timm-0.4.9 v0.4.9
fetch https://github.com/davisvideochallenge/davis2017-evaluation davis2017-evaluation
if ! /usr/bin/python3 -c 'import torchvision, cv2, tqdm' 2>/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get install -y --no-install-recommends python3-torchvision python3-opencv python3-tqdm
fi
