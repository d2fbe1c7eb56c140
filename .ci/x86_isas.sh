#!/usr/bin/env bash
# x86 CI: the int8 paths that the native (-march=native) build does not compile. On a CPU with
# VNNI the native build runs vpdpbusd only, so the ISA-dependent tests (the micro-kernels, every
# compiled path against the scalar reference and each other, and the dense kernel end to end)
# are built again without VNNI: the vpmaddubsw paths of AVX-512 and AVX2 (an AVX-512 build
# compiles both, and the portable one), or AVX2 alone where the CPU has no AVX-512. A CPU
# without VNNI already ran those paths in the native build, and cannot run the VNNI ones.
#
#   bash .ci/x86_isas.sh            # in build-x86-novnni
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-2}
dir=build-x86-novnni
has() { grep -qw "$1" /proc/cpuinfo; }
fail() { echo "x86_isas.sh: $*" >&2; exit 1; }

if ! has avx512_vnni && ! has avx_vnni; then
  echo "x86_isas.sh: no VNNI on this CPU: the native build already ran the vpmaddubsw paths"
  exit 0
fi
if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
  flags="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma" paths=3  # portable, avx2, avx512
else
  flags="-mavx2 -mfma" paths=2  # portable, avx2
fi
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
echo "== x86 without VNNI ($flags): configure"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMQALOGITS_NATIVE=OFF -DCMAKE_CXX_FLAGS="$flags" \
  "${launcher[@]}" -DMQALOGITS_BUILD_BENCH=OFF -DMQALOGITS_BUILD_EXAMPLES=OFF \
  -DMQALOGITS_BUILD_PYTHON=OFF -DMQALOGITS_TEST_FILES="host_microkernel_test.cpp;kernel_dense_test.cpp" \
  > /dev/null
echo "== x86 without VNNI: build"
cmake --build "$dir" -j "$JOBS" --target mqalogits_tests
listed=$("$dir/tests/mqalogits_tests" --list-test-names-only | sed '/^$/d' || true)
got=$(printf '%s\n' "$listed" | grep -c '^host micro-kernels: every compiled path' || true)
[ "$got" -eq "$paths" ] || fail "$got compiled host paths, expected $paths"
"$dir/tests/mqalogits_tests" --reporter compact
echo "== x86 without VNNI: done"
