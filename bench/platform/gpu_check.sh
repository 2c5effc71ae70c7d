#!/usr/bin/env bash
# The CUDA path on a lent GPU machine, in one call (bench/results/gpu.md, "On a GPU"): build the
# LibTorch-only tiers and their tests against the machine's own PyTorch, run every suite (the
# CUDA cases of tests/ssl/test_cuda.cpp, tests/models/test_cuda_models.cpp, test_grad_scaler and
# test_update_paths included), check what the wheel's libraries re-export, then time our step
# against the official one on the same card.
#   bench/platform/gpu_check.sh [OUT]          # OUT: where logs go (the device tool's $OUT)
#   bench/platform/gpu_check.sh kernels [OUT]  # the short loop of the fused kernels: build only
#       their two test executables, the CUDA cases' three and bench_train (build-gpu-kernels/, one
#       executable per test file), run those tests, then the step's variants and the official
#       step (bench/reference/official_step.py) in fp16 and bf16, alternated twice, fp32 once;
#       about 5 minutes, so that 15 minutes of a card hold two tries (issue 68). The variants,
#       GPU_CHECK_VARIANTS (default "fused graph official"): ops and fused (--kernels), graph
#       (fused with --cuda_graph true), official
# GPU_CHECK_ROUNDS (2) rounds of the step comparison; none starts after GPU_CHECK_DEADLINE (480) s.
# The machine has PyTorch, CUDA, CMake and ninja, and none of GoogleTest, nlohmann-json or
# (perhaps) zlib's headers: they travel in .deps/ (a prefix copied from Debian 12's packages:
# include/, lib/x86_64-linux-gnu/{libgtest*,libgmock*,cmake/GTest}, share/cmake/nlohmann_json,
# zlib/{include,lib/libz.a}). The official code travels in bench/reference/official/ (dino:
# main_dino.py, utils.py, vision_transformer.py; xcit: xcit.py); the machine's timm answers
# xcit.py's imports. `bench/platform/gpu_prepare.sh deps official` makes both here.
# The step is timed against main_dino.py's own (bench/reference/official_step.py) on the same
# card, alternated; the CUDA cases are checked against the CPU's results.
# Phases are bounded so that the logs come back even when one of them hangs.
set -uo pipefail
mode=full
if [[ "${1:-}" == kernels ]]; then
  mode=kernels
  shift
fi
out=${1:-${OUT:-/tmp/gpu_check}}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
start=$SECONDS
say() { echo "[$((SECONDS - start)) s] $*"; }

if [[ $mode == kernels ]]; then
  torch_cmake=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  deps=$PWD/.deps
  zlib=()
  [[ -f /usr/include/zlib.h ]] ||
    zlib=(-DZLIB_INCLUDE_DIR="$deps/zlib/include" -DZLIB_LIBRARY="$deps/zlib/lib/libz.a")
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/machine.txt"
  say "configure (one executable per test file)"
  cmake -S . -B build-gpu-kernels -G Ninja -DCMAKE_BUILD_TYPE=Release -DXDINO_LIBTORCH_ONLY=ON \
    -DXDINO_UNITY_BUILD=OFF -DCMAKE_PREFIX_PATH="$torch_cmake;$deps" -DTORCH_CUDA_ARCH_LIST=9.0 \
    -DCMAKE_CUDA_ARCHITECTURES=90 "${zlib[@]}" > "$out/configure.log" 2>&1 ||
    { tail -30 "$out/configure.log"; exit 1; }
  say "build: the kernel tests, the CUDA cases' tests and bench_train"
  timeout 300 ninja -C build-gpu-kernels test_kernel_layer_norm test_kernel_token_norm test_cuda \
    test_cuda_models test_grad_scaler bench_train > "$out/build.log" 2>&1 ||
    { grep -E "error|FAILED" "$out/build.log" | head -20; exit 1; }
  say "kernel tests and the CUDA trainer's (kFused among them)"
  for t in kernels/test_kernel_layer_norm kernels/test_kernel_token_norm ssl/test_cuda \
    models/test_cuda_models train/test_grad_scaler; do
    timeout 150 "build-gpu-kernels/tests/$t" --gtest_color=no > "$out/${t#*/}.log" 2>&1
    echo "$t: exit $?"
    grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|Which is|<= |rror|largest relative" \
      "$out/${t#*/}.log" | head -40
  done
  variants=(${GPU_CHECK_VARIANTS:-fused graph official})
  say "${variants[*]}: fp16 and bf16 alternated twice, fp32 once"
  shapes=(--arch xcit_small_12_p16 --out_dim 65536 --batch 64 --global_size 224 --local_size 96
          --locals 8 --head_hidden_dim 2048 --steps 10 --warmup 3)
  for round in 1 2; do
    for precision in fp16 bf16 fp32; do
      [[ $round == 2 && $precision == fp32 ]] && continue
      for variant in "${variants[@]}"; do
        (($((SECONDS - start)) > ${GPU_CHECK_DEADLINE:-330})) && continue
        if [[ $variant == official ]]; then
          timeout 120 python3 bench/reference/official_step.py "${shapes[@]}" --device cuda \
            --precision "$precision" 2>> "$out/bench.err" | tail -1
        else
          kernels=$variant graph=false
          [[ $variant == graph ]] && kernels=fused graph=true
          timeout 90 build-gpu-kernels/bench/bench_train "${shapes[@]}" --device cuda \
            --precision "$precision" --kernels "$kernels" --cuda_graph "$graph" \
            2>> "$out/bench.err" | tail -1
        fi | sed "s/^{/{\"kernels\": \"$variant\", \"round\": $round, /" | tee -a "$out/kernels.jsonl"
      done
    done
  done
  say "done"
  exit 0
fi

say "machine"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
torch.cuda.get_device_name(0))'
  nvcc --version | tail -1
  c++ --version | head -1
  echo "cores $(nproc)"
  ld --version | head -1
  # Which libstdc++ a plain -lstdc++ reaches (bench/results/gpu.md, "On a GPU": the link order).
  for f in libstdc++.so libstdc++.a libstdc++.so.6; do
    echo "$f: $(c++ -print-file-name=$f)"
  done
  printf '#include <filesystem>\nint main() { std::filesystem::remove_all("/nonexistent"); }\n' \
    > /tmp/fs.cpp
  c++ /tmp/fs.cpp -o /tmp/fs -Wl,--push-state,--no-as-needed,-lstdc++,--pop-state \
    -Wl,--trace 2>&1 | grep -i "stdc++" | sed 's/^/-lstdc++ resolved to: /'
  echo "needed: $(readelf -d /tmp/fs | awk '/NEEDED/ {printf "%s ", $5}')"
} 2>&1 | tee "$out/machine.txt"

torch_cmake=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
deps=$PWD/.deps
zlib=()
[[ -f /usr/include/zlib.h ]] ||
  zlib=(-DZLIB_INCLUDE_DIR="$deps/zlib/include" -DZLIB_LIBRARY="$deps/zlib/lib/libz.a")
say "configure (LibTorch at $torch_cmake)"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DXDINO_LIBTORCH_ONLY=ON \
  -DCMAKE_PREFIX_PATH="$torch_cmake;$deps" -DTORCH_CUDA_ARCH_LIST=9.0 \
  -DCMAKE_CUDA_ARCHITECTURES=90 "${zlib[@]}" > "$out/configure.log" 2>&1 ||
  { tail -30 "$out/configure.log"; exit 1; }
grep "xcit-dino:" "$out/configure.log"
say "build"
timeout 420 ninja -C build-gpu -k 0 > "$out/build.log" 2>&1
build_rc=$?
grep -E "error|FAILED" "$out/build.log" | head -20
say "build exit $build_rc"

say "tests"
# Without LD_PRELOAD: the link order (libstdc++ first) must be enough on the wheel's libtorch.
(cd build-gpu && timeout 300 ctest -j 8 --timeout 240 --output-on-failure) > "$out/ctest.log" 2>&1
grep -E "tests passed|tests failed|\*\*\*|Failed|Timeout" "$out/ctest.log" | tail -20
awk '/: Skipped$/ { getline reason } /^\[  SKIPPED \] .*ms\)$/ { print "skipped " $4 ": " reason }' \
  build-gpu/Testing/Temporary/LastTest.log | sort -u | head -20
cp build-gpu/Testing/Temporary/LastTest.log "$out/LastTest.log"
# The CUDA cases' own lines (differences found, losses) for the record.
grep -E "^\[ +(OK|FAILED) +\] (Cuda|GradScaler.*OnCuda)|largest relative|epoch [01]: loss" \
  build-gpu/Testing/Temporary/LastTest.log | tee "$out/test_cuda.txt"
scripts/libtorch_reexports.sh build-gpu/tests/*/xdino_tests_* build-gpu/bench/bench_train \
  > "$out/reexports.txt" 2>&1
head -3 "$out/reexports.txt"

say "step: ours (bench_train) against the official train_one_epoch, alternated"
shapes=(--arch xcit_small_12_p16 --out_dim 65536 --batch 64 --global_size 224 --local_size 96
        --locals 8 --head_hidden_dim 2048 --steps 10 --warmup 3)
rounds=${GPU_CHECK_ROUNDS:-2}
for round in $(seq "$rounds"); do
  for precision in fp16 bf16 fp32; do
    [[ $round == 2 && ($precision != fp16 || $((SECONDS - start)) -gt 420) ]] && continue
    (($((SECONDS - start)) > ${GPU_CHECK_DEADLINE:-480})) && continue
    timeout 90 build-gpu/bench/bench_train "${shapes[@]}" --device cuda --precision "$precision" \
      2>> "$out/bench.err" | tail -1 | tee -a "$out/step.jsonl"
    timeout 120 python3 bench/reference/official_step.py "${shapes[@]}" --device cuda \
      --precision "$precision" 2>> "$out/bench.err" | tail -1 | tee -a "$out/step.jsonl"
  done
done

# The blocks' LayerNorm paths (models/backbone.h, LayerKernels): torch's against kernels/cuda's
# fused one, alternated, twice in fp16 and bf16 (XCA's op path, kAuto, in both). Its
# correctness came first, in the tests above (test_kernel_layer_norm's CUDA cases). Then where
# the step's time goes with it (a Chrome trace: kernel time against wall time, docs/flops.md).
say "LayerNorm: torch's against the fused kernel"
for round in 1 2; do
  for precision in fp16 bf16; do
    for kernels in ops fused; do
      (($((SECONDS - start)) > ${GPU_CHECK_DEADLINE:-480})) && continue
      timeout 90 build-gpu/bench/bench_train "${shapes[@]}" --device cuda \
        --precision "$precision" --kernels "$kernels" 2>> "$out/bench.err" | tail -1 |
        sed "s/^{/{\"kernels\": \"$kernels\", \"round\": $round, /" | tee -a "$out/kernels.jsonl"
    done
  done
done
if (($((SECONDS - start)) < ${GPU_CHECK_DEADLINE:-480})); then
  say "profile: bf16, 3 steps, fused LayerNorm"
  timeout 120 build-gpu/bench/bench_train "${shapes[@]}" --steps 3 --device cuda --precision bf16 \
    --kernels fused --profile "$out/trace" 2>> "$out/bench.err" | tail -1
  ls -la "$out"/trace.* 2> /dev/null
fi
say "done"
