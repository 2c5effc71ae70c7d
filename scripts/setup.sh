#!/usr/bin/env bash
# Installs the Debian 12 packages xcit-dino needs, only those missing, as root or through sudo.
#   scripts/setup.sh           build + run dependencies (LibTorch, OpenBLAS, OpenCV, HDF5, faiss,
#                              Boost (program_options, property_tree), GoogleTest, Fashion-MNIST,
#                              cmake, g++)
#   scripts/setup.sh --tests   the same, plus what the tests compare against (Python torch/h5py)
#                              and iproute2 (the multi-host tests' network namespaces), etcd-server
#                              and curl (the etcd rendezvous' clusters), and a
#                              virtual environment XDINO_PYENV (default build/pyenv) over
#                              Debian's python3 with the pinned timm, safetensors and
#                              tensorboard that tests read `dino export` and the event files with
#   scripts/setup.sh --cuda [VENV]
#                              the --tests packages, plus LibTorch 2.15 with CUDA from pip's torch
#                              wheel in a virtual environment VENV (default build-cuda/venv), not
#                              system-wide; VENV/../libtorch links to the wheel's torch/ folder,
#                              so -DCMAKE_PREFIX_PATH=VENV/../libtorch (README, "Building against
#                              a CUDA LibTorch 2.x"). Needs the CUDA 13 toolkit (nvcc; Debian has
#                              no package of it). Prints the versions. XDINO_TORCH=2.11.0 installs
#                              another torch (one whose CUDA major is 13): the version a GPU
#                              machine's Python already has, so that the program runs beside it.
set -euo pipefail

packages=(
  cmake g++ ninja-build pkg-config
  libtorch-dev            # LibTorch 1.13 (CPU)
  libsleef-dev            # sleef.h: at::vec's exp in kernels/cpu (Debian's LibTorch links libsleef)
  libopenblas0-pthread    # optimized BLAS: Debian's libtorch calls whatever libblas.so.3 is
  libopencv-dev           # image decoding and resampling
  libhdf5-dev             # feature files and dataset shards
  zlib1g-dev              # CRC-32 of .pth records, gzip'd IDX files
  libpng-dev              # DAVIS palette masks (eval/video/indexed_png.h)
  nlohmann-json3-dev      # JSON (core/json.h)
  libfaiss-dev            # k-NN
  libgloo-dev             # headers of the Gloo backend that Debian's libtorch is built with
  libboost-program-options-dev
  libboost-dev            # header-only Boost: property_tree reads INI files in `dino report`
  libgtest-dev
  libcurl4-openssl-dev    # etcd's v3 JSON gateway (`dino launch --rdzv_backend etcd`)
  dataset-fashion-mnist   # the demo's data, /usr/share/datasets/fashion-mnist
)
# pip's torch 2.15.0 is built against CUDA 13.2 and ships that runtime (cuBLAS, cuDNN, NCCL) as
# wheels; nvcc of any CUDA 13 toolkit compiles our kernels for it (same major, so the same ABI).
torch_pin=${XDINO_TORCH:-2.15.0}
mode="${1:-}"
if [[ "$mode" == "--cuda" ]]; then
  venv="${2:-build-cuda/venv}"
  command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || {
    echo "setup: --cuda needs the CUDA 13 toolkit (nvcc on PATH or in /usr/local/cuda/bin);" \
         "install it from NVIDIA's repository first" >&2
    exit 1
  }
fi
if [[ "$mode" == "--tests" || "$mode" == "--cuda" ]]; then
  # cross-checks against Python torch, h5py and Pillow (test_h5_pack decodes our shards);
  # skimage ships the photos the retrieval and copy-detection tests build their sets from
  packages+=(python3-torch python3-h5py python3-numpy python3-pil python3-skimage
             python3-torchvision)  # tests/data/resnet (make_golden.py); test_float_pipeline
  # ip and tc: the simulated hosts of tests/multinode (network namespaces, veth, tbf)
  packages+=(iproute2)
  # the etcd rendezvous' tests run real etcd members (distributed/rendezvous/etcd.h)
  packages+=(etcd-server curl)
  # scripts/check_format.sh, which .ci/run runs: the tree is kept in clang-format 14's layout
  packages+=(clang-format)
  # Debian's python3 makes the virtual environments (the tests' packages; --cuda's torch)
  packages+=(python3-venv python3-pip)
elif [[ -n "$mode" ]]; then
  echo "usage: scripts/setup.sh [--tests | --cuda [VENV]]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages already installed"
else
  if [[ $(id -u) -eq 0 ]]; then
    sudo=()
  elif command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "setup: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${#missing[@]} missing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi

# Debian's libtorch multiplies matrices with whatever libblas.so.3 the alternatives system
# selects; make sure that is OpenBLAS and not the ~40x slower reference implementation.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
case "$blas" in
  *openblas*|*blis*|*mkl*|*atlas*) echo "setup: BLAS is $blas" ;;
  *) echo "setup: warning: libblas.so.3 is '$blas' (reference BLAS?); run" \
          "'update-alternatives --config libblas.so.3-x86_64-linux-gnu' and pick OpenBLAS" >&2 ;;
esac

if [[ "$mode" == "--tests" || "$mode" == "--cuda" ]]; then
  # What Debian does not package, pinned, in a virtual environment that sees Debian's torch,
  # torchvision and numpy (timm runs on them; numpy stays Debian's: torch 1.13 is built for it).
  pyenv="${XDINO_PYENV:-build/pyenv}"
  [[ -x "$pyenv/bin/python" ]] || /usr/bin/python3 -m venv --system-site-packages "$pyenv"
  pins=(timm==1.0.31 safetensors==0.8.0 huggingface_hub==2.4.0 tensorboard==2.21.0)
  if ! "$pyenv/bin/python" -c 'import timm, safetensors, huggingface_hub, tensorboard' 2>/dev/null; then
    echo "setup: installing ${pins[*]} into $pyenv"
    numpy=$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')
    "$pyenv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}" \
      "numpy==$numpy"
  fi
fi
if [[ "$mode" == "--cuda" ]]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [[ -x "$venv/bin/python" ]] || /usr/bin/python3 -m venv "$venv"
  installed=$("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)
  if [[ "$installed" != "$torch_pin"* ]]; then
    # The wheels (3.0 GB) sit in pip's temporary folder until all are installed (5.3 GB):
    # 8.2 GB at the peak (bench/results/platforms_and_ci.md, "Disk"). Say so before pip
    # fails halfway with "No space left on device"; --no-cache-dir keeps a third copy away.
    need_gb=9
    for dir in "$venv" "${TMPDIR:-/tmp}"; do
      free_gb=$(($(df --output=avail -B1M "$dir" | tail -1) / 1024))
      if ((free_gb < need_gb)); then
        echo "setup: torch==$torch_pin with CUDA needs about $need_gb GB free where pip" \
             "unpacks and installs it; $dir has $free_gb GB: free some space, or put the" \
             "environment (scripts/setup.sh --cuda VENV) and TMPDIR on a larger disk" >&2
        exit 1
      fi
    done
    echo "setup: installing torch==$torch_pin (CUDA) into $venv"
    "$venv/bin/python" -m pip install -q --no-cache-dir --disable-pip-version-check \
      "torch==$torch_pin"
  fi
  torch_dir=$("$venv/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  ln -sfn "$torch_dir" "$(dirname "$venv")/libtorch"
  "$venv/bin/python" -W ignore - "$nvcc" <<'PY'
import subprocess, sys, torch
nvcc = subprocess.run([sys.argv[1], "--version"], capture_output=True, text=True).stdout
nvcc = nvcc.strip().splitlines()[-1]
print(f"setup: LibTorch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
      f"{torch.backends.cudnn.version()}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}), "
      f"nvcc: {nvcc}")
PY
  echo "setup: LibTorch for CMake: -DCMAKE_PREFIX_PATH=$(cd "$(dirname "$venv")" && pwd)/libtorch"
fi
