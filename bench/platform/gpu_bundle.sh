#!/usr/bin/env bash
# Packs a CUDA `dino` built on Debian 12 for a GPU machine that has PyTorch but not our other
# dependencies (bench/platform/gpu_main_job.sh says how the build is made and how the bundle is
# used). It measures nothing itself: it is what lets gpu_main_job.sh time the main job there.
#   bench/platform/gpu_bundle.sh BUILD BUNDLE      # e.g. build-t211 .gpu
# Writes BUNDLE/dino (stripped), BUNDLE/libs.tar.xz and BUNDLE/data/ (Fashion-MNIST). Left out
# of libs.tar.xz: glibc, the C++ runtime (the GPU machine's own are newer, which is enough), and
# everything that LibTorch's wheel or the CUDA toolkit provides (the GPU machine's torch has
# them, at the same version).
set -euo pipefail
build=${1:?usage: bench/platform/gpu_bundle.sh BUILD BUNDLE}
bundle=${2:?usage: bench/platform/gpu_bundle.sh BUILD BUNDLE}
mkdir -p "$bundle/data"
strip -o "$bundle/dino" "$build/dino"
dir=$(mktemp -d)
# Libraries that OpenCV and HDF5 load for codecs and drivers that `dino` never uses (GDAL,
# FFmpeg, GStreamer, cameras, DICOM, HDF5's S3 driver) and whose dependencies would
# come to ~300 MB: each is replaced by a stand-in that defines what its users import
# (bench/platform/stub_library.py), whose functions return 0. OpenEXR stays real: OpenCV builds
# its encoder objects when it first writes a PNG.
stubs='^lib(gdal|av[a-z]+|sw[a-z]+|gst[a-z]+|gobject|glib|gphoto2[a-z_]*|dc1394|gdcm[A-Za-z]+|curl|crypto)[-_0-9.]*\.so'
closure=$(ldd "$build/dino" | awk '$2 == "=>" && $3 ~ /^\// { print $1 "=" $3 }')
users=("$build/dino" $(printf '%s\n' $closure | cut -d= -f2))
reals=()
for entry in $closure; do
  if [[ ${entry%%=*} =~ $stubs ]]; then reals+=("${entry#*=}"); fi
done
python3 "$(dirname "$0")/stub_library.py" "$dir" "${reals[@]}" -- "${users[@]}"
# With the stubs first, the libraries that remain.
LD_LIBRARY_PATH=$dir ldd "$build/dino" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' |
  grep -vE '^(libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s)\.so' |
  grep -v " $dir/" | while read -r name path; do
    case $(readlink -f "$path") in */site-packages/*|/usr/local/cuda*) continue ;; esac
    cp -L "$path" "$dir/$name"
  done
LD_LIBRARY_PATH=$dir ldd "$build/dino" | grep -q "not found" && { echo "gpu_bundle: unresolved"; exit 1; }
tar -cf - -C "$dir" . | xz -T2 -6 > "$bundle/libs.tar.xz"
echo "gpu_bundle: $(ls "$dir" | wc -l) libraries," \
  "$(du -sh "$dir" | cut -f1) -> $(du -h "$bundle/libs.tar.xz" | cut -f1) compressed"
rm -rf "$dir"
cp /usr/share/datasets/fashion-mnist/*.gz "$bundle/data/"
du -sh "$bundle"
