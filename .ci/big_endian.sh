#!/usr/bin/env bash
# Byte order: the library reads its formats with little-endian multi-byte loads and refuses to
# compile for a big-endian target (error.hpp). This job proves the refusal: the umbrella header,
# compiled by Debian's big-endian ppc64 cross compiler, must fail with exactly that one error.
set -euo pipefail
cd "$(dirname "$0")/.."

CXX_BE=${CXX_BE:-powerpc64-linux-gnu-g++}
if ! command -v "$CXX_BE" > /dev/null; then
  { [ "$(id -u)" = 0 ] && S= || S=sudo; } && $S apt-get install -y g++-powerpc64-linux-gnu
fi
fail() { echo "big_endian.sh: $*" >&2; exit 1; }

src=$(mktemp --suffix=.cpp)
log=$(mktemp)
trap 'rm -f "$src" "$log"' EXIT
printf '#include <mqalogits/mqalogits.hpp>\nint main() { return 0; }\n' > "$src"
if "$CXX_BE" -std=c++20 -Iinclude -fsyntax-only "$src" 2> "$log"; then
  fail "the library compiled for a big-endian target ($CXX_BE)"
fi
grep -q "mqalogits needs a little-endian target" "$log" || { cat "$log"; fail "no byte-order message"; }
errors=$(grep -c "error:" "$log" || true)
[ "$errors" -eq 1 ] || { cat "$log"; fail "$errors errors, expected only the byte-order one"; }
echo "big_endian.sh: refused for $CXX_BE with the byte-order message, as intended"
