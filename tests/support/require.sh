# The shell tests' counterpart of tests/support/require.h: a test that cannot run on this
# machine skips (exit 77, which ctest reports as skipped: SKIP_RETURN_CODE) unless
# XDINO_REQUIRE_ALL is set to anything but "" or "0" (.ci/run sets it), where the same check
# fails (exit 1) naming what is missing. Sourced by tests/*/test_*.sh.

skip_or_fail() {  # WHAT_IS_MISSING...
  if [[ -n "${XDINO_REQUIRE_ALL:-}" && "${XDINO_REQUIRE_ALL}" != "0" ]]; then
    echo "FAIL: this test needs $* (XDINO_REQUIRE_ALL=1)" >&2
    exit 1
  fi
  echo "SKIP: this test needs $*" >&2
  exit 77
}

require_root() {  # WHY
  [[ $(id -u) -eq 0 ]] || skip_or_fail "root ($1)"
}

require_command() {  # COMMAND PACKAGE
  command -v "$1" >/dev/null || skip_or_fail "$1 (apt-get install $2)"
}

# Sets $fashion_mnist to Debian's dataset-fashion-mnist folder.
require_fashion_mnist() {
  fashion_mnist=${XDINO_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
  [[ -e $fashion_mnist/train-images-idx3-ubyte.gz ]] ||
    skip_or_fail "$fashion_mnist (apt-get install dataset-fashion-mnist)"
}
