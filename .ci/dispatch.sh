#!/usr/bin/env bash
# Runtime dispatch on every CPU this machine can emulate. The dispatch test binary is built for
# the baseline CPU with mqalogits::dispatch (tests/dispatch); it is run natively and under
# qemu-x86_64 as older CPUs, each run told which path it must choose:
#   native     the fastest path of this CPU (read from /proc/cpuinfo by the test)
#   Haswell    avx2      (AVX2 + FMA, no AVX-512, no VNNI)
#   Nehalem    portable  (SSE4.2 only)
# and every run must pass all of the binary's test cases. Then each emulated CPU runs again with
# MQALOGITS_HOST_ISA=avx512_amx, which asks for the AMX path: neither CPU has AMX, so each must
# fall back to its own path and say why (the choice and the AMX test cases only). The ARM64 side
# (cortex-a53: neon, max: neon_dotprod) runs in .ci/arm.sh.
#
#   bash .ci/dispatch.sh                       # after the Quick start build
#   DISPATCH_TESTS=<binary> bash .ci/dispatch.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${DISPATCH_TESTS:-build/tests/mqalogits_dispatch_tests}
fail() { echo "dispatch.sh: $*" >&2; exit 1; }
[ -x "$bin" ] || fail "no $bin (build the Quick start first)"
if ! command -v qemu-x86_64 > /dev/null; then
  { [ "$(id -u)" = 0 ] && S= || S=sudo; } && $S apt-get install -y qemu-user
fi

cases=$("$bin" --list-test-names-only | grep -c '^dispatch: ' || true)
[ "$cases" -ge 3 ] || fail "$bin lists $cases dispatch test cases"

run() {  # label, expected path ('' = the test reads /proc/cpuinfo), command prefix...
  local label=$1 expect=$2 out
  shift 2
  echo "== dispatch: $label (expects ${expect:-the fastest path of this CPU})"
  out=$(env ${expect:+MQALOGITS_EXPECT_PATH=$expect} "$@" "$bin" 2>&1 | grep -v '^qemu-x86_64: warning' || true)
  printf '%s\n' "$out" | tail -n 3
  printf '%s\n' "$out" | grep -Eq "^All tests passed \([0-9]+ assertions in $cases test cases\)" ||
    fail "$label: not every one of the $cases test cases passed"
}

# The AMX path asked for on a CPU without it: the choice and the AMX case only.
run_amx() {  # label, expected path, command prefix...
  local label=$1 expect=$2 out
  shift 2
  echo "== dispatch: $label, MQALOGITS_HOST_ISA=avx512_amx (expects $expect)"
  out=$(env MQALOGITS_EXPECT_PATH="$expect" MQALOGITS_HOST_ISA=avx512_amx "$@" "$bin" \
          "dispatch: the path chosen at run time is the fastest this CPU runs,dispatch: the AMX path runs only where asked for and says why not" 2>&1 |
          grep -v '^qemu-x86_64: warning' || true)
  printf '%s\n' "$out" | tail -n 3
  printf '%s\n' "$out" | grep -Eq "^All tests passed \([0-9]+ assertions in 2 test cases\)" ||
    fail "$label with the AMX path asked for: a test case failed"
}

run native ''
run "qemu-x86_64 -cpu Haswell" avx2 qemu-x86_64 -cpu Haswell
run "qemu-x86_64 -cpu Nehalem" portable qemu-x86_64 -cpu Nehalem
run_amx "qemu-x86_64 -cpu Haswell" avx2 qemu-x86_64 -cpu Haswell
run_amx "qemu-x86_64 -cpu Nehalem" portable qemu-x86_64 -cpu Nehalem
echo "== dispatch: every CPU chose its path and passed"
