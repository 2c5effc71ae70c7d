#!/usr/bin/env bash
# Fails, naming the files, when a tracked C++/CUDA file differs from .clang-format.
#   scripts/check_format.sh        check (what .ci/run does)
#   scripts/check_format.sh --fix  rewrite the files in place
# Debian 12's clang-format 14 and Debian 13's 19 (installed by setup.sh --tests) lay out every file
# the same (bench/platform/debian13.sh's format stage checks it). They differ on a few constructs
# the code therefore avoids: a one-statement block on one line (`{ lock_guard ...; }`), `T C::*m`
# outside a `using`, `struct stat st {}` (written `= {}`), a short lambda that starts its own line
# inside a braced list. Other versions may differ more, so the check names its version.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || {
  echo "check_format: clang-format not found; run scripts/setup.sh --tests" >&2
  exit 2
}
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  exit 0
elif [[ -n "${1:-}" ]]; then
  echo "usage: scripts/check_format.sh [--fix]" >&2
  exit 2
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
version=$(clang-format --version | grep -o 'version [0-9.]*')
if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} of ${#files[@]} files differ from .clang-format (clang-format $version):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "check_format: run scripts/check_format.sh --fix and commit the result" >&2
  exit 1
fi
echo "check_format: all ${#files[@]} C++ files match .clang-format (clang-format $version)"
