#!/usr/bin/env bash
# The torch 2.x stage: `pip install .` into the virtual environment .ci/torch2_env.sh made (a
# current torch, numpy and pybind11 from PyPI), which builds the Python module and the torch op
# library against them; then the module's Python tests, test_torch_dtypes.py (torch's own
# float8_e4m3fn / float4_e2m1fn_x2 tensors, decoded by ml_dtypes), the op library's test and its
# DeepGEMM-named registration's run on the installed package, and `python -m mqalogits`
# self-checks.
#
# Cheap by reuse: the module's kernels (five units without Python) and the dispatch library are
# linked from the native build the Quick start made (NATIVE_BUILD, same compiler and build type;
# MQALOGITS_PYTHON_KERNELS_FROM), so only the three Python units and the op library's two units
# compile here.
#
# Environment: TORCH2_VENV (default .venv-torch2), NATIVE_BUILD (default build), TORCH2_BUILD
# (the wheel's build folder, default build-torch2).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
venv=${TORCH2_VENV:-.venv-torch2}
native=$(cd "${NATIVE_BUILD:-build}" && pwd)
bdir=${TORCH2_BUILD:-build-torch2}
py=$(cd "$venv/bin" && pwd)/python
step() { echo "-- $1: $(( $(date +%s) - t0 )) s"; }
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 CMAKE_BUILD_PARALLEL_LEVEL=2

"$py" -m pip install -q --no-build-isolation -C build-dir="$bdir" \
  -C cmake.define.MQALOGITS_PYTHON_KERNELS_FROM="$native" .
step "pip install . (module and op library built)"
ops_library=$(cd /tmp && "$py" -c 'import mqalogits.torch_ops as t; print(t.library_path() or "")')
[ -n "$ops_library" ] || { echo "pip install . built no torch op library (Torch not found)"; exit 1; }
deep_gemm_library=$(dirname "$ops_library")/libmqalogits_deep_gemm_ops.so
[ -f "$deep_gemm_library" ] || { echo "pip install . installed no $deep_gemm_library"; exit 1; }

# The tests, two at a time, from outside the source tree: they import the installed package.
# (test_engine_step.py and test_v41.py, whose calls the module test's cover for the torch 2.x
# conversions, run in the main test command, under Debian's torch.)
logs=$(mktemp -d) repo=$PWD
tests=(
  "examples/10_python_module/test_mqalogits.py"
  "examples/10_python_module/test_ops.py"
  "examples/10_python_module/test_package.py"
  "examples/10_python_module/test_torch_dtypes.py $ops_library"
  "examples/10_python_module/test_registry.py $ops_library"
  "examples/12_torch_ops/test_torch_ops.py $ops_library"
  "examples/12_torch_ops/test_deep_gemm_ops.py $ops_library $deep_gemm_library"
)
pids=() names=()
for t in "${tests[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n || true; done
  name=$(basename "${t%% *}" .py)
  # shellcheck disable=SC2086  # a test and its argument
  (cd /tmp && "$py" "$repo"/$t) >"$logs/$name.log" 2>&1 &
  pids+=($!) names+=("$name")
done
failed=0
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    echo "passed: ${names[$i]} ($(tail -n 3 "$logs/${names[$i]}.log" | grep -E '^(Ran|OK)' | tr '\n' ' ' || true))"
  else
    echo "FAILED: ${names[$i]}"; cat "$logs/${names[$i]}.log"; failed=1
  fi
done
step tested
(cd /tmp && "$py" -m mqalogits)
step "python -m mqalogits"
exit $failed
