#!/bin/bash
# Fetches the official code that the benchmarks time and the golden generators call into
# bench/reference/official/ (beside bench/reference/'s scripts, which import it; git ignores it):
# facebookresearch/dino, facebookresearch/xcit, timm 0.4.9 (the release xcit.py was written
# against), davisvideochallenge/davis2017-evaluation (J&F, for
# tests/data/eval_goldens/make_official_goldens.py) and facebookresearch/dinov2 (its losses, mask
# generator and collate, for tests/data/dinov2/make_goldens.py). It is never part of this project.
# Also installs python3-torchvision, -opencv and -tqdm, which the official scripts import.
#   scripts/fetch_official.sh            # needs network access to github.com
#   XDINO_GIT_MIRROR=DIR scripts/fetch_official.sh
#                                        # copies the files of DIR/<owner>+<name>/repo (a bare
#                                        # git copy of each repository) where it exists,
#                                        # github.com otherwise
# From a mirror: the files of its HEAD (a tag's, where it has the tag) that it holds (a mirror
# may lack large blobs: pictures, never code), and the commit in <folder>/.mirror-commit.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=bench/reference/official
mkdir -p "$dest"
fetch() {  # fetch <url> <folder> [<tag>]
  if [ -d "$dest/$2/.git" ] || [ -f "$dest/$2/.mirror-commit" ]; then
    echo "$dest/$2: present"
    return
  fi
  rm -rf "$dest/$2"
  local slug=${1#https://github.com/} mirror rev
  mirror="${XDINO_GIT_MIRROR:-}/${slug/\//+}/repo"
  if [ -n "${XDINO_GIT_MIRROR:-}" ] && [ -d "$mirror" ]; then
    rev=HEAD
    [ -n "${3:-}" ] && git --git-dir="$mirror" rev-parse -q --verify "$3^{commit}" >/dev/null &&
      rev=$3
    git --git-dir="$mirror" ls-tree -r --name-only "$rev" | while read -r f; do
      mkdir -p "$dest/$2/$(dirname "$f")"
      git --git-dir="$mirror" show "$rev:$f" > "$dest/$2/$f" 2>/dev/null || rm -f "$dest/$2/$f"
    done
    git --git-dir="$mirror" log -1 --format='%h %cs' "$rev" > "$dest/$2/.mirror-commit"
    echo "$dest/$2: $(cat "$dest/$2/.mirror-commit") (from $mirror)"
    return
  fi
  git clone --quiet --depth 1 ${3:+--branch "$3"} "$1" "$dest/$2"
  echo "$dest/$2: $(git -C "$dest/$2" log -1 --format='%h %cs')"
}
fetch https://github.com/facebookresearch/dino dino
fetch https://github.com/facebookresearch/xcit xcit
# Optional: where neither github.com nor a mirror has them, the benchmarks import the installed
# timm instead (bench/reference/official_step.py), and only make_official_goldens.py needs DAVIS's.
fetch https://github.com/huggingface/pytorch-image-models timm-0.4.9 v0.4.9 ||
  echo "fetch_official: timm-0.4.9 not fetched; the official code will import the installed timm"
fetch https://github.com/davisvideochallenge/davis2017-evaluation davis2017-evaluation ||
  echo "fetch_official: davis2017-evaluation not fetched (only make_official_goldens.py needs it)"
fetch https://github.com/facebookresearch/dinov2 dinov2 ||
  echo "fetch_official: dinov2 not fetched (only tests/data/dinov2/make_goldens.py needs it)"
if ! /usr/bin/python3 -c 'import torchvision, cv2, tqdm' 2>/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get install -y --no-install-recommends python3-torchvision python3-opencv python3-tqdm
fi
