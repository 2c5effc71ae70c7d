#!/usr/bin/env bash
# Debian's LibTorch 1.13 against pip's LibTorch 2.15 (+CUDA, run on the CPU) on this machine,
# same shapes, rounds alternated A B A B (issue 43; bench/results/platforms_and_ci.md, "LibTorch
# 1.13 against 2.15"):
#   step  bench_train at the main job's shapes (xcit_nano_4_p4, batch 32, 2 x 28 + 6 x 12 px,
#         out_dim 1024, head 1024, two replicas): seconds per step, and the process's peak RSS
#   knn   the main job's knn:random stage (`dino knn` on all 60000 + 10000 Fashion-MNIST images,
#         28 px, batch 256): the feature pass and the search, wall seconds and peak RSS
#
#   bench/platform/libtorch_versions.sh [A_BUILD] [B_BUILD] [ROUNDS]   (default: build build-cuda 3)
# Prints one line per run and the medians; needs both builds made (README's two build commands).
# A build may also be ROOT:FOLDER, a build inside a chroot, e.g. Debian 13's that
# bench/platform/debian13.sh leaves (/var/tmp/xcit-dino-trixie:/root/xcit-dino/build): its programs
# then run chrooted into ROOT, with ROOT's libraries (needs root; ROOT's /proc is mounted for the
# runs, in a private mount namespace of this script's, so that the mount vanishes with it, even
# after a SIGKILL).
set -euo pipefail
cd "$(dirname "$0")/../.."
a="${1:-build}" b="${2:-build-cuda}" rounds="${3:-3}"
if [[ ($a == *:* || $b == *:*) && -z ${XDINO_LIBTORCH_VERSIONS_PRIVATE:-} && $(id -u) -eq 0 ]]; then
  XDINO_LIBTORCH_VERSIONS_PRIVATE=1 exec unshare --mount --propagation private "$0" "$@"
fi
data=/usr/share/datasets/fashion-mnist
export OMP_WAIT_POLICY=PASSIVE
tmp=$(mktemp -d)
mounted=()  # what this script mounted, undone on exit
trap 'for m in "${mounted[@]}"; do umount -l "$m"; done; rm -rf "$tmp"' EXIT

root_of() { [[ $1 == *:* ]] && echo "${1%%:*}" || true; }  # the chroot of a build, or nothing
folder_of() { echo "${1#*:}"; }                           # its folder, as its programs see it
# program BUILD PATH: the command line of one of the build's programs, into the array `command`
program() {
  local root
  root=$(root_of "$1")
  if [[ -n $root ]]; then
    command=(chroot "$root" "$(folder_of "$1")/$2")  # the environment (OMP_WAIT_POLICY) goes along
  else
    command=("$1/$2")
  fi
}

for d in "$a" "$b"; do
  for exe in bench/bench_train dino; do
    [[ -x "$(root_of "$d")$(folder_of "$d")/$exe" ]] ||
      { echo "libtorch_versions: $d/$exe is missing; build it first" >&2; exit 2; }
  done
  root=$(root_of "$d")
  if [[ -n $root ]]; then
    [[ $(id -u) -eq 0 ]] || { echo "libtorch_versions: $d runs chrooted: needs root" >&2; exit 2; }
    if ! mountpoint -q "$root/proc"; then
      mount -t proc proc "$root/proc"
      mounted+=("$root/proc")
    fi
  fi
done

version() {
  local root
  root=$(root_of "$1")
  echo "$(grep '^Torch_DIR' "$root$(folder_of "$1")/CMakeCache.txt" | cut -d= -f2)${root:+ in $root, Debian $(cat "$root/etc/debian_version")}"
}

# One timed run: prints "<what> <build> <seconds> <peak RSS MiB>".
step() {
  local d="$1" json
  program "$d" bench/bench_train
  json=$(/usr/bin/time -f "%M" -o "$tmp/rss" "${command[@]}" --arch xcit_nano_4_p4 \
    --out_dim 1024 --batch 32 --global_size 28 --local_size 12 --locals 6 --head_hidden_dim 1024 \
    --replicas 2 --steps 20 --warmup 3 2>/dev/null | grep '^{')
  echo "step $d $(sed 's/.*"sec_per_step": \([0-9.]*\).*/\1/' <<<"$json") $(($(cat "$tmp/rss") / 1024))"
}
knn() {
  local d="$1" t0 t1 out
  out=/tmp/xdino_libtorch_versions_knn  # inside the chroot for a chrooted build
  rm -rf "$(root_of "$d")$out"
  program "$d" dino
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$tmp/rss" "${command[@]}" knn --arch xcit_nano_4_p4 --data_path "$data" \
    --image_size 28 --batch_size_per_gpu 256 --num_workers 2 --output_dir "$out" \
    >"$tmp/knn.log" 2>&1 || { cat "$tmp/knn.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  rm -rf "$(root_of "$d")$out"
  echo "knn $d $(python3 -c "print(f'{$t1 - $t0:.2f}')") $(($(cat "$tmp/rss") / 1024))"
}

echo "A: $a ($(version "$a")), B: $b ($(version "$b")); $(lscpu | grep 'Model name' | sed 's/  */ /g')"
for ((r = 1; r <= rounds; r++)); do
  for what in step knn; do
    "$what" "$a"
    "$what" "$b"
  done
done | tee "$tmp/runs"

python3 - "$tmp/runs" "$a" "$b" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
a, b = sys.argv[2], sys.argv[3]
for what, unit in (("step", "s/step"), ("knn", "s")):
    med = {}
    for d in (a, b):
        sec = [float(r[2]) for r in rows if r[0] == what and r[1] == d]
        rss = [int(r[3]) for r in rows if r[0] == what and r[1] == d]
        med[d] = statistics.median(sec)
        print(f"{what}: {d}: median {med[d]:.3f} {unit} (min {min(sec):.3f}, max {max(sec):.3f}), "
              f"peak RSS {max(rss)} MiB")
    pairs = [float(x[2]) / float(y[2]) for x, y in
             zip([r for r in rows if r[0] == what and r[1] == a],
                 [r for r in rows if r[0] == what and r[1] == b])]
    print(f"{what}: time {a}/{b} per round: " + ", ".join(f"{p:.2f}" for p in pairs))
PY
