#!/usr/bin/env bash
# The torch 2.x stage's virtual environment (.ci/torch2.sh): a current torch from PyPI, numpy,
# ml_dtypes (the tests' independent FP8 / FP4 decoder), pybind11 and scikit-build-core (what
# `pip install --no-build-isolation .` builds with). .ci/run starts this in the
# background at its very start: it is network- and disk-bound while the first stages compile.
#
# The CPU kernels need none of torch's CUDA libraries, but its CUDA wheel's libraries link them.
# Cheap route: torch without its dependencies, its pure-Python requirements, and the four CUDA
# libraries a CUDA toolkit installed on the machine does not provide (or provides too old);
# `import torch`, a matmul and a float8 cast are then checked. Where that fails (no CUDA toolkit
# on the machine), torch is installed with all its dependencies (several GB).
#
# Usage: torch2_env.sh <venv folder>
set -euo pipefail
venv=${1:?usage: torch2_env.sh <venv folder>}
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 )) s"; }
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m venv --clear "$venv"
py=$venv/bin/python
pip() { "$py" -m pip install -q "$@"; }

pip --no-deps torch
echo "torch downloaded and unpacked: $(elapsed)"
# torch's requirements: "pure" ones (no extra, not CUDA) and the CUDA libraries of the cheap
# route, each with torch's own pin.
requirements() {  # pure | cuda
  "$py" - "$1" <<'PY'
import importlib.metadata as md, re, sys
cuda_libs = ("cufile", "cusparselt", "nvshmem", "nccl")
for r in md.requires("torch") or []:
    spec, _, marker = (s.strip() for s in r.partition(";"))
    if "extra ==" in marker:
        continue
    name = re.match(r"[A-Za-z0-9_.-]+", spec).group(0).lower()
    if not name.startswith(("nvidia-", "cuda-", "triton")):
        if sys.argv[1] == "pure":
            print(spec)
    elif sys.argv[1] == "cuda":
        if re.fullmatch(r"nvidia-(%s)(-cu\d+)?" % "|".join(cuda_libs), name):
            print(spec)
        m = re.fullmatch(r"(cuda-toolkit)\[([^\]]*)\](.*)", spec)
        if m and "cufile" in m.group(2).split(","):
            print("%s[cufile]%s" % (m.group(1), m.group(3)))
PY
}
mapfile -t pure < <(requirements pure)
mapfile -t cuda < <(requirements cuda)
pip "${pure[@]}" numpy ml_dtypes pybind11 scikit-build-core
pip "${cuda[@]}"  # with their own small dependencies (cuda-toolkit[cufile]: nvidia-cufile)
echo "torch's requirements ${pure[*]} and ${cuda[*]}, numpy, ml_dtypes, pybind11, scikit-build-core: $(elapsed)"

works() {
  "$py" -c 'import torch
x = torch.randn(64, 64)
assert torch.isfinite(x @ x).all()
assert torch.tensor([1.0, -2.5]).to(torch.float8_e4m3fn).view(torch.uint8).tolist() == [0x38, 0xC2]'
}
if works 2>/dev/null; then
  echo "torch without its CUDA dependencies imports and runs"
else
  echo "torch does not import without its CUDA dependencies here: installing them all"
  pip "torch==$("$py" -c 'import importlib.metadata as m; print(m.version("torch"))')"
  works
fi
"$py" -c 'import torch, numpy, ml_dtypes, pybind11
print("torch", torch.__version__, "numpy", numpy.__version__, "ml_dtypes", ml_dtypes.__version__,
      "pybind11", pybind11.__version__)'
echo "torch 2.x environment ready in $(elapsed) ($(du -sh "$venv" | cut -f1))"
