#!/usr/bin/env bash
# Sanitizer CI: the whole test suite under ASan+UBSan, the test files that start
# threads under TSan (tests/unit/hostile_test.cpp among them: aliasing, moved-from metadata, pool
# lifetime, broken executors, helper bounds),
# and a bounded run of each libFuzzer target over its committed corpus. Clang 14 (libFuzzer comes
# with Debian's libclang-rt-14-dev). ASan at -O0 with line tables: the whole suite compiles in a
# fraction of -O1's time and runs fast enough under ASan (stack traces still name file and line).
# The exception is the NeuronCore model's test files, at -O1: its instances are theirs alone, and
# the files link first, so the linker keeps their -O1 copy of what they share with the others.
# TSan at -O1: its threaded files are a subset, and TSan slows unoptimised kernels far more
# (kernel_dense_test: -O0 6 s to compile + 77 s to run, -O1 17 s + 31 s, CPU seconds).
#
#   bash .ci/sanitizers.sh              # everything, in build-asan and build-tsan
#   FUZZ_SECONDS=60 bash .ci/sanitizers.sh
#   SANITIZE_FLAGS="-O1 -g" bash .ci/sanitizers.sh   # these flags for both builds
#
# Each build only compiles the test binary (and the fuzzers), not the benchmarks or examples.
set -euo pipefail
cd "$(dirname "$0")/.."

CXX=${CXX_SANITIZE:-clang++}
JOBS=${JOBS:-2}
# The fuzz smoke replays each target's whole committed corpus, then mutates it for what is left
# of the time: 10 s each here (six targets, two at a time: 30 s of the job), longer by hand.
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
ASAN_DIR=${ASAN_DIR:-build-asan}
TSAN_DIR=${TSAN_DIR:-build-tsan}
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

configure() {  # dir, sanitizers, optimisation, extra cmake args...
  local dir=$1 san=$2 opt=$3
  shift 3
  cmake -S . -B "$dir" -DCMAKE_CXX_COMPILER="$CXX" "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_FLAGS="${SANITIZE_FLAGS:-$opt -gline-tables-only}" \
    -DMQALOGITS_BUILD_BENCH=OFF -DMQALOGITS_BUILD_EXAMPLES=OFF \
    -DMQALOGITS_SANITIZE="$san" "$@" > /dev/null
}

t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }

# A finding must fail the test, never scroll by: abort on the first report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# SANITIZER_JOBS picks the jobs (default both): "asan" (ASan + UBSan and the fuzz smoke run),
# "tsan".
jobs=" ${SANITIZER_JOBS:-asan tsan} "

if [[ $jobs == *" asan "* ]]; then
stamp "ASan+UBSan: configure and build (tests + fuzzers)"
# (The runtime-dispatch tests run the same kernel code as the test binary: left to the main
# build, which runs them natively and under qemu, to keep CI inside its time.)
# The kernel tests' instances on the NeuronCore model were a third of this stage's test time
# (the model at -O0): its memory safety is checked here by its own test files
# (neuron_*_test.cpp, every kernel on every generation), and the native build runs the kernel
# tests' shapes on it.
# The model's own test files compile at -O1 (MQALOGITS_TEST_NEURON_OPT): at -O0 they ran 395 s of
# CPU under ASan, at -O1 74 s, for 180 s more compile time.
# Left out: the NeuronCore floor's tests and example 09's line checks, cost arithmetic over every
# printed line (16 s of CPU under ASan, and the floor file's compile), which touches no buffer of
# its own: the native build runs them.
asan_files=$(for f in tests/unit/*.cpp tests/integration/*.cpp; do
               [ "$(basename "$f")" = neuron_floor_test.cpp ] || basename "$f"
             done | paste -sd ';')
configure "$ASAN_DIR" address,undefined -O0 -DMQALOGITS_FUZZ=ON -DMQALOGITS_FUZZ_SECONDS="$FUZZ_SECONDS" \
  -DMQALOGITS_DISPATCH_TESTS=OFF -DMQALOGITS_TEST_HOST_COMBOS_ONLY=ON -DMQALOGITS_TEST_NEURON_OPT=-O1 \
  -DMQALOGITS_TEST_FILES="$asan_files"
cmake --build "$ASAN_DIR" -j "$JOBS" --target mqalogits_tests fuzz_dense fuzz_paged fuzz_sparse \
  fuzz_paged_sparse fuzz_topk fuzz_helpers
stamp "ASan+UBSan: every test"
# (The consumer, abi and readme tests build programs of their own, without sanitizers, and the
# python test needs the module: the main CI runs them.)
ctest --test-dir "$ASAN_DIR" -j "$JOBS" -LE 'fuzz|consumer|abi|python|readme' -E '^example 09' \
  --output-on-failure
stamp "fuzz smoke: each target ${FUZZ_SECONDS} s over its corpus"
ctest --test-dir "$ASAN_DIR" -j "$JOBS" -L fuzz --output-on-failure
fi

if [[ $jobs == *" tsan "* ]]; then

# TSan only sees races between threads, and kernels run serially unless the caller passes an
# executor: it builds the test files that start threads (a thread pool, std::thread or async),
# found by name so a new threaded test joins by itself. The Neuron model, head-dim and index-type
# tests, which are serial and about 40% of the compile time, stay with ASan, and so do the kernel
# tests' instances on the model (it runs on the calling thread).
tsan_files=$({ grep -lE 'thread_pool|std::j?thread|std::async' tests/unit/*.cpp \
                 tests/integration/*.cpp || true; } | xargs -rn1 basename | paste -sd ';')
[ -n "$tsan_files" ] || { echo "sanitizers.sh: no threaded test files found" >&2; exit 1; }
stamp "TSan: configure and build ($tsan_files)"
configure "$TSAN_DIR" thread -O1 -DMQALOGITS_TEST_FILES="$tsan_files" -DMQALOGITS_DISPATCH_TESTS=OFF \
  -DMQALOGITS_TEST_HOST_COMBOS_ONLY=ON
cmake --build "$TSAN_DIR" -j "$JOBS" --target mqalogits_tests
stamp "TSan: the threaded test files"
ctest --test-dir "$TSAN_DIR" -j "$JOBS" -LE 'fuzz|consumer|abi|python|readme' --output-on-failure
fi
stamp "sanitizers done"
