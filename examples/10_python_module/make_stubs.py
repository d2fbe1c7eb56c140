#!/usr/bin/env python3
"""Writes the package's type stubs, mqalogits/__init__.pyi, from the compiled module's own
signatures and docstrings (pybind11's first docstring line), so the stubs name every public
function with its real arguments and never fall behind the bindings.

Usage: make_stubs.py <folder holding the built extension, mqalogits/>

Array arguments and results are typed Any: a function takes numpy arrays or torch tensors and
returns the kind it was given.
"""
import importlib.util
import os
import re
import sys


def _load_signature_reader():
    """The package's own reader of pybind11 signature lines (python/mqalogits/_signature.py),
    so the stubs and the wrappers split arguments alike."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python", "mqalogits",
                        "_signature.py")
    spec = importlib.util.spec_from_file_location("_mqalogits_signature", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


split_top = _load_signature_reader().split_top

SIMPLE = {"bool": "bool", "str": "str", "int": "int", "float": "float",
          "typing.SupportsInt": "int", "typing.SupportsFloat": "float", "None": "None"}


def stub_type(t, classes):
    """pybind11 2's 'Optional[int]' and pybind11 3's 'typing.SupportsInt | typing.SupportsIndex
    | None' alike -> 'Optional[int]'; arrays and objects -> Any."""
    t = t.strip()
    m = re.fullmatch(r"(?:typing\.)?Optional\[(.*)\]", t)
    parts = [m.group(1)] if m else [p.strip() for p in t.split("|")]
    optional = bool(m) or "None" in parts
    parts = [p for p in parts if p != "None"] or ["None"]
    if "typing.SupportsFloat" in parts:
        kind = "float"
    elif "typing.SupportsInt" in parts or "typing.SupportsIndex" in parts:
        kind = "int"
    elif len(parts) == 1 and parts[0] in SIMPLE:
        kind = SIMPLE[parts[0]]
    elif len(parts) == 1 and parts[0].rsplit(".", 1)[-1] in classes:
        kind = parts[0].rsplit(".", 1)[-1]
    else:
        return "Any"
    return "Optional[%s]" % kind if optional and kind != "None" else kind


def function_stub(name, doc, classes):
    """'def name(a: T, b: T = ..., *, c: T = ...) -> R:' and the docstring's other lines."""
    lines = (doc or "").splitlines()
    m = re.match(r"^%s\((.*)\)\s*->\s*(.+)$" % re.escape(name), lines[0] if lines else "")
    if not m:
        raise SystemExit("make_stubs: %s has no pybind11 signature line: %r" % (name, doc))
    params = []
    for p in split_top(m.group(1)):
        if p in ("*", "/"):
            params.append(p)
            continue
        pname, _, rest = p.partition(":")
        annotation, eq, _ = rest.partition("=")
        params.append("%s: %s%s" % (pname.strip(), stub_type(annotation, classes),
                                    " = ..." if eq else ""))
    body = "\n".join(lines[1:]).strip().replace("\\", "\\\\").replace('"""', r'\"\"\"')
    text = "def %s(%s) -> %s:\n" % (name, ", ".join(params), stub_type(m.group(2), classes))
    if body:
        text += '    """%s"""\n' % body.replace("\n", "\n    ").replace("    \n", "\n")
    return text + "    ...\n"


def main(folder):
    path = [f for f in os.listdir(folder) if f.startswith("_mqalogits.") and f.endswith(".so")]
    if len(path) != 1:
        raise SystemExit("make_stubs: expected one _mqalogits*.so in %s, found %s" % (folder, path))
    spec = importlib.util.spec_from_file_location("mqalogits._mqalogits",
                                                  os.path.join(folder, path[0]))
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    public = sorted(n for n in dir(ext) if not n.startswith("_"))
    classes = {n for n in public if isinstance(getattr(ext, n), type)}
    out = ['"""Type stubs of mqalogits, written from the compiled module by make_stubs.py."""',
           "from typing import Any, Optional", "", "from . import torch_ops as torch_ops", "",
           "__version__: str", "__all__: list[str]", ""]
    for n in public:
        obj = getattr(ext, n)
        if n in classes:
            doc = (obj.__doc__ or "").strip().replace("\\", "\\\\")
            out.append("class %s:" % n + ('\n    """%s"""' % doc if doc else "") + "\n    ...\n")
        elif callable(obj):
            out.append(function_stub(n, obj.__doc__, classes))
        else:
            out.append("%s: %s\n" % (n, type(obj).__name__))
    with open(os.path.join(folder, "__init__.pyi"), "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
