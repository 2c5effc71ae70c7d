#!/usr/bin/env bash
# Prints one of the commands README.md gives, as README.md prints it, so that what CI and the
# Debian 13 check run cannot drift from what a reader copies:
#   main   the first command of the README's first code block (install, build, the main job)
#   tests  the second (install, build, every test; .ci/run runs it)
#   cuda        the first command under "## Building against a CUDA LibTorch 2.x" (.ci/run; the full
#               program and every test)
#   cuda-core   the second (the LibTorch-only tiers and their tests)
# Continuation lines ending in a backslash are joined.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  main | tests) awk -v want="$1" '
      /^```sh/ && !seen { on = 1; seen = 1; next }
      /^```/ && on { exit }
      on && /^scripts\/setup\.sh/ { n++; if ((want == "main" && n == 1) || (want == "tests" && n == 2)) print }
    ' README.md ;;
  cuda | cuda-core) awk -v want="$1" '
      /^## Building against a CUDA LibTorch 2\.x/ { sec = 1; next }
      sec && /^```sh/ { on = 1; next }
      on && /^```/ { exit }
      on && !/^#/ {
        line = line $0
        if (line ~ /\\$/) { sub(/\\$/, "", line); next }
        n++
        if ((want == "cuda" && n == 1) || (want == "cuda-core" && n == 2)) print line
        line = ""
      }
    ' README.md ;;
  *) echo "usage: scripts/readme_command.sh main|tests|cuda|cuda-core" >&2; exit 2 ;;
esac
