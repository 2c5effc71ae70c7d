#!/usr/bin/env bash
# Runs the README's two commands on Debian 13 (trixie), the current stable: debootstraps trixie
# into a folder of the build tree, clones this repository into it, chroots and runs the first
# command (install, build, the main job) and the second (install, build, every test), each with
# its time and exit status. A benchmark-style check (issue 43): minutes of downloads and a build,
# so it is not part of every CI run. Measured against Debian 12, where the README's commands and
# CI run: the same tests passing, the same report to within 0.01 points
# (bench/results/platforms_and_ci.md, "Debian 13"); bench/platform/libtorch_versions.sh times
# the two systems' builds side by side.
#
#   bench/platform/debian13.sh [ROOT] [STAGES]
#     ROOT    the chroot (default /var/tmp/xcit-dino-trixie, outside the build tree, so that
#             `rm -rf build` never meets it; reused when it is already there)
#     STAGES  any of: bootstrap configure tests main format (default: bootstrap tests);
#             "configure" runs the test command's install and cmake steps alone (minutes, mostly
#             downloads), "tests" the whole command (build, every test), "main" the whole main
#             job (~25 min on 2 cores), "format" scripts/check_format.sh with Debian 13's
#             clang-format (after "tests" or "configure", which install it)
#
# Needs root (debootstrap, mount, chroot, unshare) and Debian's debootstrap. Its mounts (the
# host's /dev and /sys under ROOT among them) are made in a private mount namespace of its own:
# they exist only for this script's processes and vanish with them, even after a SIGKILL, so
# nothing of the host is ever reachable under ROOT afterwards. The commands run exactly as
# README.md prints them: they are read from its first code block, not copied here.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $(id -u) -eq 0 ]] || { echo "debian13: needs root (debootstrap, mount, chroot)" >&2; exit 2; }
if [[ -z ${XDINO_DEBIAN13_PRIVATE:-} ]]; then
  command -v unshare >/dev/null || { echo "debian13: unshare not found; apt-get install util-linux" >&2; exit 2; }
  XDINO_DEBIAN13_PRIVATE=1 exec unshare --mount --propagation private "$0" "$@"
fi
root="${1:-/var/tmp/xcit-dino-trixie}"
stages="${2:-bootstrap tests}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
log_dir="$root.logs"
mkdir -p "$log_dir"

command -v debootstrap >/dev/null || {
  echo "debian13: debootstrap not found; apt-get install debootstrap" >&2
  exit 2
}

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM
bind() {  # bind(src, dst): a bind mount undone by cleanup
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounted+=("$2")
}

now() { date +%s; }

if [[ " $stages " == *" bootstrap "* && ! -x "$root/usr/bin/apt-get" ]]; then
  t0=$(now)
  debootstrap --variant=minbase --include=ca-certificates,git,sudo trixie "$root" "$mirror" \
    >"$log_dir/debootstrap.log" 2>&1 || {
    echo "debian13: debootstrap failed; see $log_dir/debootstrap.log" >&2
    exit 1
  }
  echo "debian13: debootstrap trixie into $root: $(($(now) - t0)) s"
fi
[[ -x "$root/usr/bin/apt-get" ]] || { echo "debian13: no chroot at $root; run the bootstrap stage" >&2; exit 2; }

# Nothing may be mounted under ROOT before the clone is removed (a run from before this script
# had its namespace, killed, could have left the host's /dev there): say so instead.
if leftover=$(findmnt -rn -o TARGET | grep -E "^$(realpath "$root")(/|$)"); then
  echo "debian13: $(head -1 <<<"$leftover") is still mounted under $root; unmount it first" \
    "(umount -R $(head -1 <<<"$leftover"))" >&2
  exit 2
fi
# A fresh clone of what is committed, as CI takes it (uncommitted changes do not travel).
rm -rf --one-file-system "$root/root/xcit-dino"
git clone -q . "$root/root/xcit-dino"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The chroot's / a mount point, as a machine's is: `ip netns exec` (the multi-host tests,
# tests/cli/multinode/hosts.sh) makes / a slave mount and fails on a folder that is not one.
bind "$root" "$root"
mount -t proc proc "$root/proc"
mounted+=("$root/proc")
bind /sys "$root/sys"
bind /dev "$root/dev"
bind /dev/pts "$root/dev/pts"
mount -t tmpfs tmpfs "$root/run"
mounted+=("$root/run")

# The README's two commands, as printed there: the lines after "# 1." and "# 2." in its first
# code block that start with scripts/setup.sh.
commands=()
mapfile -t commands < <(awk '/^```sh/{on=1; next} /^```/{if (on) exit} on && /^scripts\/setup.sh/' README.md)
((${#commands[@]} == 2)) || { echo "debian13: README.md's first block has ${#commands[@]} commands, expected 2" >&2; exit 1; }

in_chroot() {  # in_chroot(name, command): runs it in the clone, logs, prints time and status
  local name="$1" cmd="$2" t0 rc
  t0=$(now)
  set +e
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 CI=true XDINO_REQUIRE_ALL=1 \
    bash -c "cd /root/xcit-dino && $cmd" >"$log_dir/$name.log" 2>&1
  rc=$?
  set -e
  echo "debian13: $name: exit $rc in $(($(now) - t0)) s (log: $log_dir/$name.log)"
  grep -E "tests passed|tests failed|Total Test time" "$log_dir/$name.log" | sed "s/^/debian13:   /" || true
  return $rc
}

status=0
chroot "$root" bash -c '. /etc/os-release; echo "debian13: chroot is $PRETTY_NAME, $(uname -m)"'
if [[ " $stages " == *" configure "* ]]; then
  # The test command's first two steps: install, cmake.
  in_chroot configure "$(sed 's/ && /\n/g' <<<"${commands[1]}" | head -2 | paste -sd'&' | sed 's/&/ \&\& /g')" || status=1
fi
if [[ " $stages " == *" tests "* ]]; then in_chroot tests "${commands[1]}" || status=1; fi
if [[ " $stages " == *" main "* ]]; then in_chroot main "${commands[0]}" || status=1; fi
if [[ " $stages " == *" format "* ]]; then
  in_chroot format "clang-format --version && scripts/check_format.sh" || status=1
  sed "s/^/debian13:   /" "$log_dir/format.log"
fi
chroot "$root" bash -c 'for p in g++ libtorch-dev libopencv-dev libfaiss-dev; do
  dpkg-query -W -f="debian13:   \${Package} \${Version}\n" $p 2>/dev/null; done' || true
exit $status
