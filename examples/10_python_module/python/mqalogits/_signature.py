"""The parameters of a compiled function, read from the signature line pybind11 writes first in
its docstring ('name(a: object, b: int = 0, *, c: Optional[int] = None) -> object').

One reader serves the package's wrappers (their inspect.signature, their short TypeErrors) and
make_stubs.py (the .pyi stubs), so the two never disagree on a function's arguments.
"""

import ast
import inspect


def split_top(text):
    """text split on its top-level commas ('Optional[int]', 'tuple[int, int]' stay whole)."""
    parts, depth, part = [], 0, ""
    for ch in text:
        depth += ch in "[(" and 1 or 0
        depth -= ch in "])" and 1 or 0
        if ch == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += ch
    if part.strip():
        parts.append(part)
    return [p.strip() for p in parts]


class Parameter:
    """One argument: its name, its annotation as written, its default as written ('' when it
    has none), and whether it is keyword-only."""

    def __init__(self, name, annotation, default, keyword_only):
        self.name, self.annotation = name, annotation
        self.default, self.keyword_only = default, keyword_only


def signature_line(doc):
    """The first line of a docstring, or '' without one."""
    return doc.splitlines()[0] if doc else ""


def parameters(doc):
    """The parameters of the signature line of doc, in order ([] when it has none)."""
    line = signature_line(doc)
    if "(" not in line:
        return []
    inside = line[line.find("(") + 1:line.rfind(")")]
    found, keyword_only = [], False
    for p in split_top(inside):
        if p == "*":
            keyword_only = True
            continue
        if p == "/":
            continue
        name, _, rest = p.partition(":")
        annotation, eq, default = rest.partition("=")
        found.append(Parameter(name.strip(), annotation.strip(), default.strip() if eq else "",
                               keyword_only))
    return found


class _Default:
    """A default pybind11 printed that is not a Python literal: shown as printed."""

    def __init__(self, text):
        self._text = text

    def __repr__(self):
        return self._text


def _default_value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return _Default(text)


def signature(doc):
    """An inspect.Signature of the signature line of doc (annotations left out: they describe
    the compiled function's conversions, not what a caller may pass)."""
    params = []
    for p in parameters(doc):
        kind = (inspect.Parameter.KEYWORD_ONLY if p.keyword_only
                else inspect.Parameter.POSITIONAL_OR_KEYWORD)
        default = _default_value(p.default) if p.default else inspect.Parameter.empty
        params.append(inspect.Parameter(p.name, kind, default=default))
    return inspect.Signature(params)
