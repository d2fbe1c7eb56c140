#!/usr/bin/env bash
# x86 CI, after the native build (README's Quick start, in NATIVE_BUILD):
#
# 1. The instruction-set mix under qemu-x86_64 (Debian's qemu-user). The native build's
#    isa_mix_<order> programs link one unit built for the baseline, one with -mavx2 -mfma and one
#    with -march=native (tests/abi/CMakeLists.txt), in every order; natively ctest ran them all
#    (abi.isa_mix_*). Here each runs again on emulated CPUs that lack the other units'
#    instructions: -cpu Nehalem (SSE4.2) runs the baseline unit, -cpu Haswell (AVX2 + FMA) the
#    baseline and AVX2 units. If the linker had kept another unit's copy of any code they run
#    (a library function, or a standard-library instantiation under a shared name), it would be
#    SIGILL. First, a control: the AVX2 unit forced to run under Nehalem must be SIGILL. The ODR
#    programs' AMX unit (tests/abi) runs under -cpu Haswell too, where it must never be called.
#
# 2. The int8 paths that the native (-march=native) build does not compile. On a CPU with
# VNNI the native build runs vpdpbusd only, so the ISA-dependent tests (the micro-kernels, every
# compiled path against the scalar reference and each other, and the dense kernel end to end)
# are built again without VNNI: the vpmaddubsw paths of AVX-512 and AVX2 (an AVX-512 build
# compiles both, and the portable one), or AVX2 alone where the CPU has no AVX-512. A CPU
# without VNNI already ran those paths in the native build, and cannot run the VNNI ones.
#
#   bash .ci/x86_isas.sh            # in build-x86-novnni
#   NATIVE_BUILD=build bash .ci/x86_isas.sh   # the native build holding tests/abi/isa_mix_*
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-2}
NATIVE_BUILD=${NATIVE_BUILD:-build}
dir=build-x86-novnni
has() { grep -qw "$1" /proc/cpuinfo; }
fail() { echo "x86_isas.sh: $*" >&2; exit 1; }

# 1. The instruction-set mix under qemu.
mix=()
for p in "$NATIVE_BUILD"/tests/abi/isa_mix_*; do
  [ -f "$p" ] && [ -x "$p" ] && mix+=("$p")
done
if [ ${#mix[@]} -eq 0 ]; then
  if has avx2 && has fma; then
    fail "no $NATIVE_BUILD/tests/abi/isa_mix_* programs: build the native suite first"
  fi
  echo "x86_isas.sh: no AVX2 + FMA on this CPU: no instruction-set mix programs to emulate"
else
  if ! command -v qemu-x86_64 > /dev/null; then
    { [ "$(id -u)" = 0 ] && S= || S=sudo; } && $S apt-get install -y qemu-user
  fi
  # Haswell less the features TCG does not emulate (it warns about each, and runs without them).
  haswell=Haswell-noTSX,-pcid,-x2apic,-tsc-deadline,-invpcid
  echo "== instruction-set mix under qemu-x86_64: ${#mix[@]} programs"
  # The control: qemu must refuse AVX2 on Nehalem, or the runs below prove nothing.
  if "${mix[0]}" --list | grep -qx avx2; then
    rc=0
    qemu-x86_64 -cpu Nehalem "${mix[0]}" --unchecked avx2 > /dev/null 2>&1 || rc=$?
    [ "$rc" -eq 132 ] || fail "the AVX2 unit under -cpu Nehalem ended with $rc, not SIGILL (132)"
    echo "control: the AVX2 unit under -cpu Nehalem is SIGILL, as it must be"
  fi
  for p in "${mix[@]}"; do
    echo "-- $(basename "$p"), -cpu Nehalem: base"
    qemu-x86_64 -cpu Nehalem "$p" base || fail "$(basename "$p") under -cpu Nehalem"
    units=(base)
    "$p" --list | grep -qx avx2 && units+=(avx2)
    echo "-- $(basename "$p"), -cpu Haswell: ${units[*]}"
    qemu-x86_64 -cpu "$haswell" "$p" "${units[@]}" || fail "$(basename "$p") under -cpu Haswell"
  done
  echo "== instruction-set mix under qemu-x86_64: every unit ran its own path"
  # The ODR programs (tests/abi) hold a unit built for the AMX path where the compiler has its
  # flags: under -cpu Haswell (no AVX-512, no AMX) it must stay linked and never be called,
  # while the others run.
  for p in "$NATIVE_BUILD"/tests/abi/abi_odr_ab "$NATIVE_BUILD"/tests/abi/abi_odr_ba; do
    [ -x "$p" ] || continue
    echo "-- $(basename "$p"), -cpu Haswell: the AMX unit must not run"
    out=$(qemu-x86_64 -cpu "$haswell" "$p" 2>&1) || fail "$(basename "$p") under -cpu Haswell: $out"
    printf '%s\n' "$out" | grep -v '^qemu-x86_64: warning' | tail -n 2
    native=$("$p") || fail "$(basename "$p") natively: $native"
    if printf '%s\n' "$native" | grep -q '^unit e'; then
      printf '%s\n' "$out" | grep -q '^unit e: the AMX unit, linked and not run' ||
        fail "$(basename "$p") under -cpu Haswell called its AMX unit"
    fi
  done
fi

# 2. The int8 paths without VNNI.

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
