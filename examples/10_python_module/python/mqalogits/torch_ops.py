"""The torch op library (``torch.ops.mqalogits.*``: the kernels as torch operators, for
TorchScript, ``torch.compile`` graphs and C++ engines), where the package was built with it:
``pip install --no-build-isolation .`` in an environment where torch imports builds it against
that torch and installs it here.

    import mqalogits.torch_ops
    ops = mqalogits.torch_ops.load()   # torch.ops.mqalogits

The ops: DeepGEMM's fp8_fp4_mqa_logits, fp8_mqa_logits, fp8_fp4_paged_mqa_logits,
fp8_paged_mqa_logits (each with the fused top-k keywords topk=, topk_out=, topk_values_out=,
topk_index=, topk_short_rows=, and the candidate blocks: candidate_topk_blocks=,
candidate_block_size=, candidate_order=, candidate_padding=, candidate_out=), the sparse and paged-sparse kernels, their metadata
(get_mqa_logits_metadata, get_paged_mqa_logits_metadata, get_num_sms / set_num_sms, ...) and
vLLM's indexer_k_quant_and_cache(_mxfp4), cp_gather_indexer_k_quant_cache and indexer_q_quant.
The dense, paged and cache ops have Meta kernels: FakeTensor and ``torch.compile`` trace them.
"""

import os

_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libmqalogits_torch_ops.so")


def library_path():
    """The op library's path (for ``torch.ops.load_library`` or a C++ engine's dlopen), or None
    where the package was built without it."""
    return _LIBRARY if os.path.exists(_LIBRARY) else None


def load():
    """Loads the op library into torch (imports torch) and returns ``torch.ops.mqalogits``.
    Raises ImportError where the package was built without it. It runs only with the torch it
    was built against."""
    path = library_path()
    if path is None:
        raise ImportError("mqalogits was built without the torch op library: reinstall it with "
                          "`pip install --no-build-isolation .` where torch imports")
    import torch

    torch.ops.load_library(path)
    return torch.ops.mqalogits


def load_deep_gemm():
    """Loads the op library and its DeepGEMM-named registration (the same kernels under
    ``torch.ops.deep_gemm.*`` with upstream's schemas, so an engine's existing DeepGEMM calls run
    on CPU unchanged) and returns ``torch.ops.deep_gemm``. Opt-in: nothing is registered under
    DeepGEMM's names until this is called. Raises ImportError where the package has no such
    library."""
    path = os.path.join(os.path.dirname(_LIBRARY), "libmqalogits_deep_gemm_ops.so")
    if library_path() is None or not os.path.exists(path):
        raise ImportError("mqalogits was built without the DeepGEMM-named torch ops: reinstall it "
                          "with `pip install --no-build-isolation .` where torch imports")
    load()
    import torch

    torch.ops.load_library(path)
    return torch.ops.deep_gemm
