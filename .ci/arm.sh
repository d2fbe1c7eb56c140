#!/usr/bin/env bash
# ARM64 CI: the test suite cross-compiled with Debian's g++-aarch64-linux-gnu for two targets,
#   armv8.2-a+dotprod   NEON with sdot: the ctest suite (Catch2 tests, ABI test, consumer
#                       projects) under qemu-aarch64 (Debian's qemu-user), less the test files
#                       whose code has no host-ISA or target dependence (ARM_SKIP_FILES: the
#                       NeuronCore model, a scalar cost model, the allocation counts of the
#                       workspace logic, and the AMX tile model with the x86 AMX path run on
#                       it, a path no ARM CPU takes), and the kernel tests' instances on that
#                       model: the native build runs them, and the sanitizer build, and under
#                       qemu they took over a third of the job
#   armv8-a             NEON without the dot-product extension (widening int8 multiplies): only
#                       the tests whose code differs between the two, the micro-kernels (every
#                       compiled path against the scalar reference), and the runtime-dispatch
#                       tests as cortex-a53 (the four kernels on the three formats end to end on
#                       that path). Everything above the micro-kernel is the same code on both
#                       targets, and the full suite twice under emulation cost CI half an hour.
# The full build also proves it registered the full test count: when the test binary dies at
# start-up, Catch2 2.13's test discovery registers nothing and ctest still reports "100% tests
# passed" over what is left.
#
#   bash .ci/arm.sh                 # both targets, in build-arm-dotprod and build-arm-v8
#   ARM_TARGETS=dotprod bash .ci/arm.sh   # one of them
#   NATIVE_TESTS=build/tests/mqalogits_tests bash .ci/arm.sh   # the native list to compare with
#   ARM_OPT=-O2 bash .ci/arm.sh     # the test binaries' optimisation (-O1 here: a third less
#                                   # compile time than the native build's -O2, for a tenth
#                                   # more run time under qemu)
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-2}
NATIVE_TESTS=${NATIVE_TESTS:-build/tests/mqalogits_tests}
SYSROOT=/usr/aarch64-linux-gnu
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

if ! command -v aarch64-linux-gnu-g++ > /dev/null || ! command -v qemu-aarch64 > /dev/null; then
  { [ "$(id -u)" = 0 ] && S= || S=sudo; } && $S apt-get install -y g++-aarch64-linux-gnu qemu-user
fi

t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
fail() { echo "arm.sh: $*" >&2; exit 1; }

# Test names without a type-list instance suffix (" - hb::compiled_isas - 1"): the same set on
# every target, whatever instruction sets it compiles.
# The consumer projects that check CMake's packaging (install, find_package, FetchContent,
# add_subdirectory, pkg-config), which is the same whatever the target: the native build runs
# them. Cross-compiled here they cost a minute of the job; the projects that depend on the
# target (the dispatch library's consumer, the strict-flags build for aarch64) still run.
packaging_only='^consumer\.(install|find_package|find_package_neuron|backend_neuron|fetchcontent|fetchcontent_git|add_subdirectory|pkgconfig)$'

base_names() { sed -E 's/ - [A-Za-z0-9_:]+ - [0-9]+$//' | sort -u; }

# The full job's test files: all but these (their test names start with the prefixes below).
ARM_SKIP_FILES=${ARM_SKIP_FILES-neuron_cost_test.cpp neuron_head_dim_test.cpp neuron_kernels_test.cpp neuron_model_test.cpp neuron_floor_test.cpp allocation_test.cpp amx_tile_model_test.cpp amx_path_test.cpp}
# (and the one test that MQALOGITS_TEST_HOST_COMBOS_ONLY leaves out of a file that is built).
host_only_names='determinism: NeuronCore model'
skipped_names="^(neuron|example 09|allocations|amx|$host_only_names)"
full_files=$(for f in tests/unit/*.cpp tests/integration/*.cpp; do
               case " $ARM_SKIP_FILES " in *" $(basename "$f") "*) ;; *) basename "$f" ;; esac
             done | paste -sd ';')
if [ -n "$ARM_SKIP_FILES" ]; then
  # Each skipped file's tests, and only they, carry one of the prefixes.
  for f in $ARM_SKIP_FILES; do
    grep -qE 'TEST_CASE' "tests/unit/$f" || fail "ARM_SKIP_FILES: tests/unit/$f has no tests"
  done
  grep -lE "TEST_CASE\(\"(neuron|example 09|allocations|amx)" tests/unit/*.cpp tests/integration/*.cpp |
    xargs -rn1 basename | while read -r f; do
      case " $ARM_SKIP_FILES " in *" $f "*) ;; *) fail "$f has tests named like the skipped files'" ;; esac
    done
else
  skipped_names="^($host_only_names)"
fi

native_list=
if [ -x "$NATIVE_TESTS" ]; then
  # (Tests tagged [x86], e.g. the MXCSR denormal tests, exist on x86 builds only.)
  native_list=$("$NATIVE_TESTS" --list-test-names-only '~[x86]' | sed '/^$/d' |
                  grep -vE "$skipped_names" || true)
  [ -n "$native_list" ] || fail "$NATIVE_TESTS lists no tests"
fi

# The test names a built test binary lists under qemu (empty when it dies at start-up).
list_tests() {  # build dir
  qemu-aarch64 -L "$SYSROOT" "$1/tests/mqalogits_tests" --list-test-names-only | sed '/^$/d' || true
}

configure() {  # dir, -march value, extra cmake args...
  local dir=$1 march=$2
  shift 2
  cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="${ARM_OPT:--O1} -DNDEBUG" \
    -DMQALOGITS_TEST_OPT="${ARM_OPT:--O1}" \
    -DCMAKE_CXX_FLAGS="-march=$march" "${launcher[@]}" \
    -DMQALOGITS_BUILD_BENCH=OFF -DMQALOGITS_BUILD_EXAMPLES=OFF -DMQALOGITS_BUILD_PYTHON=OFF \
    "$@" > /dev/null
}

# The micro-kernel tests run every compiled path: portable and NEON.
check_paths() {  # name, test list
  local paths
  paths=$(printf '%s\n' "$2" | grep -c '^host micro-kernels: every compiled path' || true)
  [ "$paths" -eq 2 ] || fail "$1: $paths compiled host paths, expected portable and neon"
}

run_full() {  # name, -march value
  local name=$1 march=$2 dir=build-arm-$1
  stamp "$name ($march): configure"
  # (The runtime-dispatch tests run in the armv8-a job, built for that baseline.)
  # (The kernel tests' NeuronCore-model instances are left out as well: see ARM_SKIP_FILES.)
  configure "$dir" "$march" "-DMQALOGITS_TEST_FILES=$full_files" -DMQALOGITS_DISPATCH_TESTS=OFF \
    -DMQALOGITS_TEST_HOST_COMBOS_ONLY=ON
  stamp "$name: build the test binary and the ABI test programs"
  local abi=()
  [ -n "$(cmake --build "$dir" --target help | grep -o 'abi_odr_ab')" ] && abi=(abi_odr_ab abi_odr_ba)
  cmake --build "$dir" -j "$JOBS" --target mqalogits_tests "${abi[@]}"

  stamp "$name: registered test count"
  local listed registered
  listed=$(list_tests "$dir")
  local n_listed n_registered
  n_listed=$(printf '%s\n' "$listed" | grep -c . || true)
  # ctest's tests less those that are not the binary's: consumer projects, ABI programs, the
  # format-axis compile-time refusal, the include-graph check (layers), readme and python.
  registered=$(ctest --test-dir "$dir" -N | sed -nE 's/^ *Test +#[0-9]+: //p' |
                 grep -vE '^(consumer|abi|format_axis|layers)\.|^(readme|python)$' || true)
  n_registered=$(printf '%s\n' "$registered" | grep -c . || true)
  echo "$name: $n_listed tests in the binary (under qemu), $n_registered registered with ctest"
  [ "$n_listed" -gt 0 ] || fail "$name: the test binary lists no tests under qemu (dies at start-up?)"
  [ "$n_registered" -eq "$n_listed" ] || fail "$name: ctest registered $n_registered of $n_listed tests"
  if [ -n "$native_list" ]; then
    diff <(printf '%s\n' "$native_list" | base_names) <(printf '%s\n' "$listed" | base_names) ||
      fail "$name: the ARM test list differs from the native one ($NATIVE_TESTS)"
    echo "$name: same tests as the native build ($(printf '%s\n' "$native_list" | grep -c .) there)"
  fi
  check_paths "$name" "$listed"

  stamp "$name: ctest under qemu-aarch64"
  ctest --test-dir "$dir" -j "$JOBS" --output-on-failure -E "$packaging_only"
  stamp "$name: done"
}

# The ISA-dependent tests only, run straight from the binary (one process under qemu). The
# dispatch tests below run every kernel end to end on this path, so the dense kernel's own tests
# are not run again here (40 s of the job).
isa_tests="host_microkernel_test.cpp"
run_isa_tests() {  # name, -march value
  local name=$1 march=$2 dir=build-arm-$1
  stamp "$name ($march): configure ($isa_tests)"
  configure "$dir" "$march" -DMQALOGITS_TEST_FILES="$isa_tests"
  stamp "$name: build"
  cmake --build "$dir" -j "$JOBS" --target mqalogits_tests
  local listed
  listed=$(list_tests "$dir")
  [ -n "$listed" ] || fail "$name: the test binary lists no tests under qemu (dies at start-up?)"
  check_paths "$name" "$listed"
  stamp "$name: $(printf '%s\n' "$listed" | grep -c .) tests under qemu-aarch64"
  qemu-aarch64 -L "$SYSROOT" "$dir/tests/mqalogits_tests" --reporter compact
  # Runtime dispatch: the baseline-built binary picks neon without the dot-product extension
  # and neon_dotprod with it, and passes every test case on both.
  stamp "$name: runtime dispatch under qemu-aarch64 -cpu cortex-a53 and -cpu max"
  cmake --build "$dir" -j "$JOBS" --target mqalogits_dispatch_tests
  local cases out cpu expect
  cases=$(qemu-aarch64 -L "$SYSROOT" "$dir/tests/mqalogits_dispatch_tests" --list-test-names-only |
            grep -c '^dispatch: ' || true)
  [ "$cases" -ge 3 ] || fail "$name: the dispatch test binary lists $cases test cases"
  for cpu in cortex-a53:neon max:neon_dotprod; do
    expect=${cpu#*:}
    out=$(MQALOGITS_EXPECT_PATH=$expect qemu-aarch64 -cpu "${cpu%%:*}" -L "$SYSROOT" \
            "$dir/tests/mqalogits_dispatch_tests" 2>&1 || true)
    printf '%s\n' "$out" | tail -n 2
    printf '%s\n' "$out" | grep -Eq "^All tests passed \([0-9]+ assertions in $cases test cases\)" ||
      fail "$name: runtime dispatch on ${cpu%%:*} (expects $expect) did not pass all $cases test cases"
  done
  stamp "$name: done"
}

for target in ${ARM_TARGETS:-dotprod v8}; do
  case $target in
    v8) run_isa_tests v8 armv8-a ;;
    dotprod) run_full dotprod armv8.2-a+dotprod ;;
    *) fail "unknown ARM target '$target' (v8, dotprod)" ;;
  esac
done
stamp "ARM job done"
