#!/usr/bin/env bash
# Which symbols an executable imports that a LibTorch library defines AND another library it
# loads defines too: for those the load order decides which copy runs (the GPU wheel's
# libtorch.so carried std::filesystem, and the crash that came of it is why CMakeLists.txt puts
# libstdc++ first). Prints one line per such symbol: name, then every library defining it,
# in load order; exit 0 with "none" when there are none.
#   scripts/libtorch_reexports.sh build/dino [build/tests/core/xdino_tests_core ...]
set -euo pipefail
(( $# > 0 )) || { echo "usage: $0 EXECUTABLE..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for exe in "$@"; do
  [[ -f "$exe" ]] || { echo "$exe: no such file" >&2; exit 2; }
  # Libraries in the dynamic linker's load order, with their resolved paths.
  ldd "$exe" | awk '/=> \// {print $3}' > "$tmp/libs"
  nm -D --undefined-only "$exe" | awk '{print $2}' | sed 's/@.*//' | sort -u > "$tmp/imports"
  : > "$tmp/defs"
  while read -r lib; do
    nm -D --defined-only "$lib" 2>/dev/null | awk -v l="$(basename "$lib")" \
      '$2 ~ /^[TWiVBDR]$/ {sub(/@.*/, "", $3); print $3 "\t" l}' >> "$tmp/defs"
  done < "$tmp/libs"
  # symbol -> libraries in load order, kept when a libtorch*/libc10* and another both define it
  awk -F'\t' 'NR == FNR {want[$1] = 1; next}
              ($1 in want) {libs[$1] = libs[$1] " " $2;
                            if ($2 ~ /^lib(torch|c10)/) t[$1] = 1; else o[$1] = 1}
              END {for (s in libs) if (t[s] && o[s]) print s "\t" libs[s]}' \
    "$tmp/imports" "$tmp/defs" | sort > "$tmp/shared"
  echo "$exe: $(wc -l < "$tmp/shared") imported symbols defined by LibTorch and another library"
  if [[ -s "$tmp/shared" ]]; then
    c++filt < "$tmp/shared" | sed 's/^/  /'
  else
    echo "  none"
  fi
done
