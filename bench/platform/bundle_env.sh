# Sourced by bench/platform/gpu_main_job.sh and gpu_user_run.sh: runs a `dino` bundle
# (bench/platform/gpu_bundle.sh) on a GPU machine that has PyTorch but not our other libraries.
#   bundle_env BUNDLE PYTHON
# Unpacks BUNDLE/libs.tar.xz (the Debian libraries) into /tmp/xdino_libs and exports
# LD_LIBRARY_PATH: PYTHON's torch/lib and the CUDA libraries of its nvidia wheels first (the
# bundle leaves those out: the build used the same torch version), then the bundle's.
bundle_env() {
  local bundle=$1 python=$2 libs=/tmp/xdino_libs site cuda_libs
  mkdir -p "$libs" && tar -xJf "$bundle/libs.tar.xz" -C "$libs"
  site=$("$python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  cuda_libs=$(find "$site/nvidia" -maxdepth 3 -name lib -type d 2>/dev/null | paste -sd:)
  export LD_LIBRARY_PATH="$site/torch/lib:$cuda_libs:$libs"
}
