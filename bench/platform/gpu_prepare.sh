#!/usr/bin/env bash
# Prepares, on this Debian 12 machine, everything a call to a lent GPU machine carries, so that
# a session with a device spends its minutes measuring, not packing. Measures nothing.
#   bench/platform/gpu_prepare.sh [deps] [official] [bundle]      # default: all three
# Makes (each git-ignored; the device tool's `carry` names them):
#   .deps/                   what gpu_check.sh builds the LibTorch-only tiers and their tests
#                            with, which the GPU machine lacks: GoogleTest and nlohmann-json
#                            (headers, static libraries, CMake files) and zlib, copied from
#                            Debian 12's packages;
#   bench/reference/official/  the official code (scripts/fetch_official.sh; XDINO_GIT_MIRROR
#                            works here too), for official_step.py and official_e2e.py;
#   .gpu/                    a `dino` and a `bench_train` built against the GPU machine's
#                            PyTorch (XDINO_TORCH, default 2.11.0, a CUDA 13 build), with the
#                            Debian libraries they load (bench/platform/gpu_bundle.sh), for
#                            gpu_main_job.sh and gpu_user_run.sh. The build folder is
#                            build-t<version>; the first build takes about 30 minutes on 2 cores.
# Then prints the carry list and its size, which must stay under the tool's 64 MiB.
# On the GPU machine:
#   bench/platform/gpu_check.sh "$OUT"                    (carry .deps bench/reference/official)
#   bench/platform/gpu_user_run.sh .gpu "$OUT"            (carry .gpu bench/reference/official)
#   bench/platform/gpu_main_job.sh .gpu "$OUT"            (carry .gpu)
set -euo pipefail
cd "$(dirname "$0")/../.."
parts=("$@")
((${#parts[@]})) || parts=(deps official bundle)
has() { [[ " ${parts[*]} " == *" $1 "* ]]; }

if has deps; then
  rm -rf .deps && mkdir -p .deps/include .deps/lib/x86_64-linux-gnu/cmake .deps/share/cmake \
    .deps/zlib/include .deps/zlib/lib
  cp -r /usr/include/gtest /usr/include/gmock /usr/include/nlohmann .deps/include/
  cp /usr/lib/x86_64-linux-gnu/libgtest*.a /usr/lib/x86_64-linux-gnu/libgmock*.a \
    .deps/lib/x86_64-linux-gnu/
  cp -r /usr/lib/x86_64-linux-gnu/cmake/GTest .deps/lib/x86_64-linux-gnu/cmake/
  cp -r /usr/share/cmake/nlohmann_json .deps/share/cmake/
  cp /usr/include/zlib.h /usr/include/zconf.h .deps/zlib/include/
  cp /usr/lib/x86_64-linux-gnu/libz.a .deps/zlib/lib/
  echo "gpu_prepare: .deps $(du -sh .deps | cut -f1)"
fi

if has official; then
  scripts/fetch_official.sh
fi

if has bundle; then
  torch=${XDINO_TORCH:-2.11.0}
  build=build-t${torch//./}
  XDINO_TORCH=$torch scripts/setup.sh --cuda "$build/venv"
  mkdir -p "$build"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PWD/$build/libtorch" -DXDINO_LIBTORCH_ONLY=OFF \
    -DXDINO_BUILD_TESTS=OFF > "$build/xdino-configure.log"
  cmake --build "$build" --target dino bench_train
  rm -rf .gpu
  bench/platform/gpu_bundle.sh "$build" .gpu
  strip -o .gpu/bench_train "$build/bench/bench_train"
  # The tree the bundle was built from, so that a later session knows whether it is stale.
  echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/results' || echo ' + uncommitted changes')" > .gpu/TREE
fi

echo "gpu_prepare: what a device call carries:"
for p in .deps bench/reference/official .gpu; do
  [[ -e $p ]] && echo "  $p $(du -sh "$p" | cut -f1)"
done
total=$(du -scm .deps bench/reference/official .gpu 2>/dev/null | tail -1 | cut -f1)
echo "gpu_prepare: ${total} MiB in all (the device tool carries 64 MiB at most; carry only the" \
  "folders a script needs)"
