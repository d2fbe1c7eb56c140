"""mqalogits: DeepSeek-V3.2 lightning-indexer logits from FP8 / FP4 inputs on the host CPU, with
DeepGEMM's Python names, argument names, order and defaults.

Every function takes numpy arrays or CPU torch tensors, viewed in place (never copied):

- torch ``uint8`` / ``float8_e4m3fn`` codes, ``int8`` (or ``float4_e2m1fn_x2``) packed FP4,
  ``float32`` / ``float16`` / ``bfloat16`` weights and keys, ``int32`` / ``int64`` lengths,
  tables and indices; the numpy equivalents (bfloat16 as ``uint16`` or ``int16`` bits).
- Given any torch tensor, a function returns torch tensors (bfloat16 logits as
  ``torch.bfloat16``), otherwise numpy arrays. Output buffers passed as ``out=``,
  ``topk_out=``, ``topk_values_out=``, ``candidate_out=`` are written in place and returned as
  given.
- Tensors that require grad are read through ``.detach()`` (the kernels are not differentiable);
  an output buffer that requires grad is refused, as torch refuses it for its own ``out=``.
  Tensors must be on the CPU.

The module never imports torch: it converts tensors only when the caller has imported torch
(a tensor exists), and works on numpy alone without it. Importing it imports neither.

The compiled functions live in ``mqalogits._mqalogits``; each public function here wraps one of
them with the conversions above and short ``TypeError`` messages (the argument's name, type,
dtype and shape, never its values).
"""

import sys as _sys

from . import _mqalogits as _ext
from . import _signature

__all__ = []


def _torch():
    """The torch module if the caller imported it (never imported here)."""
    return _sys.modules.get("torch")


def _is_tensor(torch, x):
    return torch is not None and isinstance(x, torch.Tensor)


def _numpy():
    """numpy if imported (there are no numpy arrays to handle otherwise)."""
    return _sys.modules.get("numpy")


def _summary(x):
    """A short description of an argument: its type, and dtype and shape for arrays."""
    torch = _torch()
    if _is_tensor(torch, x):
        return "torch.Tensor %s %s" % (str(x.dtype).replace("torch.", ""), list(x.shape))
    np = _numpy()
    if np is not None and isinstance(x, np.ndarray):
        return "numpy.ndarray %s %s" % (x.dtype, list(x.shape))
    if isinstance(x, (tuple, list)):
        inner = ", ".join(_summary(v) for v in x[:4]) + (", ..." if len(x) > 4 else "")
        return "%s (%s)" % (type(x).__name__, inner)
    r = repr(x)
    if len(r) > 40:
        r = r[:37] + "..."
    return "%s %s" % (type(x).__name__, r)


def _tensor_to_numpy(torch, fn, name, t, output):
    """A zero-copy numpy view of a CPU tensor (bfloat16 as int16 bits, float8 codes as uint8,
    float4_e2m1fn_x2 as int8)."""
    if t.device.type != "cpu":
        raise ValueError("%s: %s is on %s; the kernels run on the host CPU (pass a CPU tensor)"
                         % (fn, name, t.device))
    if t.requires_grad:
        if output:
            raise ValueError("%s: %s requires grad; an output buffer must not (the kernels are "
                             "not differentiable)" % (fn, name))
        t = t.detach()
    dt = t.dtype
    if dt == torch.bfloat16:
        t = t.view(torch.int16)
    elif dt == getattr(torch, "float8_e4m3fn", None):
        t = t.view(torch.uint8)
    elif dt == getattr(torch, "float4_e2m1fn_x2", None):
        t = t.view(torch.int8)
    elif str(dt).startswith("torch.float8") or str(dt).startswith("torch.float4"):
        raise ValueError("%s: %s has dtype %s; FP8 codes are float8_e4m3fn (or uint8)"
                         % (fn, name, dt))
    try:
        return t.numpy()
    except (TypeError, RuntimeError) as e:
        raise ValueError("%s: %s (torch.Tensor %s %s) has no numpy view: %s"
                         % (fn, name, dt, list(t.shape), str(e).splitlines()[0])) from None


_OUTPUTS = ("out", "topk_out", "topk_values_out", "candidate_out")
# Arguments a function writes into besides those: outputs too (no grad, handed back as given).
_WRITTEN = {
    "cp_gather_indexer_k_quant_cache": ("dst_k", "dst_scale"),
    "indexer_k_quant_and_cache": ("kv_cache",),
    "indexer_k_quant_and_cache_mxfp4": ("kv_cache",),
}


def _has_tensor(torch, x):
    if isinstance(x, (tuple, list)):
        return any(_has_tensor(torch, v) for v in x)
    return _is_tensor(torch, x)


def _numpy_to_tensor(torch, a):
    """A zero-copy tensor of a result array (bfloat16 logits, uint16 bits, as torch.bfloat16)."""
    np = _numpy()
    if isinstance(a, tuple):
        return tuple(_numpy_to_tensor(torch, v) for v in a)
    if np is None or not isinstance(a, np.ndarray):
        return a
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _kind(annotation):
    """An argument's annotation as pybind11 2 writes it: pybind11 3 writes int arguments as
    'typing.SupportsInt | typing.SupportsIndex' and optional ones as '... | None'."""
    parts = [p.strip() for p in annotation.split("|")]
    optional = "None" in parts
    parts = [p for p in parts if p != "None"]
    if "typing.SupportsFloat" in parts:
        kind = "float"
    elif "typing.SupportsInt" in parts or "typing.SupportsIndex" in parts:
        kind = "int"
    else:
        kind = " | ".join(parts)
    return "Optional[%s]" % kind if optional else kind


def _params(fn):
    """(names, annotations, names without a default, number before the keyword-only ones) of a
    compiled function."""
    params = _signature.parameters(fn.__doc__)
    names = [p.name for p in params]
    kinds = [_kind(p.annotation) for p in params]
    required = [p.name for p in params if not p.default]
    positional = [p for p in params if not p.keyword_only]
    return names, kinds, required, len(positional)


def _fits(kind, v):
    """Whether pybind11 would take v for an argument annotated `kind`."""
    if kind.startswith("Optional[") and v is None:
        return True
    kind = kind[9:-1] if kind.startswith("Optional[") else kind
    np = _numpy()
    ints = (int, np.integer) if np else (int,)
    if kind == "int":
        return isinstance(v, ints)
    if kind == "bool":
        return isinstance(v, (bool, np.bool_) if np else (bool,))
    if kind == "str":
        return isinstance(v, str)
    if kind == "float":
        return isinstance(v, ints + ((float, np.floating) if np else (float,)))
    return True  # object: anything


def _type_error(fn, name, args, kwargs):
    """pybind11's 'incompatible function arguments' (which prints every argument whole) as a
    short TypeError naming the argument that does not fit."""
    names, kinds, required, npos = _params(fn)
    if len(args) > npos:
        return TypeError("%s() takes %d positional arguments, %d given"
                         % (name, npos, len(args)))
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            return TypeError("%s() got an unexpected keyword argument '%s' (it takes %s)"
                             % (name, k, ", ".join(names)))
        if k in bound:
            return TypeError("%s() got multiple values for argument '%s'" % (name, k))
        bound[k] = v
    for n, kind in zip(names, kinds):
        if n in bound and not _fits(kind, bound[n]):
            return TypeError("%s(): %s must be %s, not %s" % (name, n, kind, _summary(bound[n])))
    missing = [n for n in required if n not in bound]
    # A missing argument is never guessed from the others (DeepGEMM's order is kept whole).
    detail = ("missing %s; it takes (%s)" % (", ".join(missing), ", ".join(names[:npos]))) \
        if missing else ", ".join("%s=%s" % (n, _summary(v)) for n, v in bound.items())
    return TypeError("%s(): incompatible arguments (%s)" % (name, detail))


def _wrap(name, fn):
    names = _params(fn)[0]
    written = _OUTPUTS + _WRITTEN.get(name, ())

    def call(*args, **kwargs):
        torch = _torch()
        given = None  # the caller's output buffers, as converted -> as given
        viewed = {}  # label -> (the dtype the extension sees, the caller's dtype)
        if torch is not None:
            found = False

            def conv(x, label, output=False):
                # An output at any depth (indexer_q_quant's out=((q_packed, q_scale),
                # weights_out)) is refused if it requires grad, and handed back as given.
                nonlocal found, given
                if _is_tensor(torch, x):
                    found = True
                    c = _tensor_to_numpy(torch, name, label, x, output)
                    if str(c.dtype) != str(x.dtype).replace("torch.", ""):
                        viewed[label] = (str(c.dtype), str(x.dtype).replace("torch.", ""))
                    if output:
                        given = given or {}
                        given[id(c)] = x
                    return c
                if isinstance(x, (tuple, list)) and _has_tensor(torch, x):
                    return tuple(conv(v, "%s[%d]" % (label, i), output) for i, v in enumerate(x))
                return x

            def label(i):
                return names[i] if i < len(names) else "argument %d" % i

            args = tuple(conv(a, label(i), label(i) in written) for i, a in enumerate(args))
            for k in list(kwargs):
                kwargs[k] = conv(kwargs[k], k, k in written)
            if not found:
                torch = None
            elif "num_threads" in names and kwargs.get("num_threads") is None:
                # The torch caller's thread count, as the torch op library uses.
                kwargs["num_threads"] = torch.get_num_threads()
        try:
            result = fn(*args, **kwargs)
        except TypeError as e:
            if "incompatible function arguments" in str(e):
                raise _type_error(fn, name, args, kwargs) from None
            raise
        except ValueError as e:
            # The extension sees bfloat16 as int16 bits, float8 as uint8 codes: name the
            # caller's dtype.
            message = str(e)
            for label, (seen, theirs) in viewed.items():
                # q=(codes, scales): the extension names the codes "q" as well as "q[0]".
                for said in {label, label[:-3] if label.endswith("[0]") else label}:
                    message = message.replace("%s has dtype %s" % (said, seen),
                                              "%s has dtype %s" % (said, theirs))
            if message != str(e):
                raise ValueError(message) from None
            raise
        if torch is None:
            return result

        def back(r):
            if isinstance(r, tuple):
                return tuple(back(v) for v in r)
            if given and id(r) in given:
                return given[id(r)]
            return _numpy_to_tensor(torch, r)

        return back(result)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = fn.__doc__
    call.__signature__ = _signature.signature(fn.__doc__)
    call.__module__ = __name__
    return call


for _name in dir(_ext):
    if _name.startswith("_"):
        continue
    _obj = getattr(_ext, _name)
    if type(_obj).__name__ == "builtin_function_or_method":
        _obj = _wrap(_name, _obj)
    globals()[_name] = _obj
    __all__.append(_name)
__version__ = _ext.__version__
del _name, _obj
