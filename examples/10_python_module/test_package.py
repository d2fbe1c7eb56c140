#!/usr/bin/env python3
"""The package around the compiled module, as `pip install` ships it: `python -m mqalogits`
(version, host path, a passing self-check), the type stubs (every public function with its real
argument names, in order, keyword-only ones after the *), py.typed, and mqalogits.torch_ops.

Usage: test_package.py   (the package on PYTHONPATH)
"""
import ast
import os
import re
import subprocess
import sys
import unittest

import mqalogits as ml

FOLDER = os.path.dirname(ml.__file__)


def pybind11_params(fn):
    """The argument names of a compiled function's signature line, '*' included."""
    line = fn.__doc__.splitlines()[0]
    inside = line[line.index("(") + 1:line.rindex(")")]
    names, depth, part = [], 0, ""
    for ch in inside + ",":
        depth += (ch in "[(") - (ch in "])")
        if ch == "," and depth == 0:
            if part.strip():
                names.append(part.split(":")[0].strip())
            part = ""
        else:
            part += ch
    return names


class Main(unittest.TestCase):
    def test_version_host_path_and_self_check(self):
        run = subprocess.run([sys.executable, "-m", "mqalogits"], capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        lines = run.stdout.splitlines()
        self.assertEqual(lines[0], "mqalogits " + ml.__version__)
        self.assertEqual(lines[1], "host path: " + ml.host_isa_name())
        self.assertRegex(lines[2], r"^self-check: [1-9]\d* dense calls .* passed$")


class Stubs(unittest.TestCase):
    def test_stubs_name_every_function_with_its_arguments(self):
        with open(os.path.join(FOLDER, "__init__.pyi")) as f:
            tree = ast.parse(f.read())
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        public = {n: getattr(ml, n) for n in ml.__all__}
        functions = {n for n, o in public.items() if callable(o) and not isinstance(o, type)}
        self.assertEqual(set(defs), functions)
        self.assertEqual(classes, {n for n, o in public.items() if isinstance(o, type)})
        for name in sorted(functions):
            a = defs[name].args
            stub = [p.arg for p in a.args] + (["*"] if a.kwonlyargs else []) + \
                [p.arg for p in a.kwonlyargs]
            with self.subTest(function=name):
                self.assertEqual(stub, pybind11_params(public[name]))
                self.assertTrue(re.match(r"^\w", ast.get_docstring(defs[name]) or "x"))

    def test_signatures_are_the_compiled_functions(self):
        import inspect

        for name in sorted(n for n in ml.__all__ if callable(getattr(ml, n))
                           and not isinstance(getattr(ml, n), type)):
            sig = inspect.signature(getattr(ml, name))
            shown = []
            for p in sig.parameters.values():
                if p.kind == p.KEYWORD_ONLY and "*" not in shown:
                    shown.append("*")
                self.assertIn(p.kind, (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY), name)
                shown.append(p.name)
            with self.subTest(function=name):
                self.assertEqual(shown, pybind11_params(getattr(ml, name)))
        dense = inspect.signature(ml.fp8_fp4_mqa_logits).parameters
        # DeepGEMM's defaults, as values a caller can use.
        self.assertIs(dense["clean_logits"].default, True)
        self.assertEqual(dense["max_seqlen_k"].default, 0)
        self.assertEqual(dense["logits_dtype"].default, "float32")
        self.assertIs(dense["q"].default, inspect.Parameter.empty)
        self.assertIs(dense["num_threads"].kind, inspect.Parameter.KEYWORD_ONLY)
        bound = inspect.signature(ml.fp8_fp4_paged_mqa_logits).bind(1, 2, 3, 4, 5, 6, 7)
        self.assertEqual(bound.arguments["max_context_len"], 7)

    def test_every_function_says_what_it_does(self):
        for name in ml.__all__:
            obj = getattr(ml, name)
            if callable(obj) and not isinstance(obj, type):
                lines = [l for l in (obj.__doc__ or "").splitlines()[1:] if l.strip()]
                with self.subTest(function=name):
                    self.assertGreaterEqual(len(" ".join(lines).split()), 12, obj.__doc__)

    def test_py_typed(self):
        self.assertTrue(os.path.isfile(os.path.join(FOLDER, "py.typed")))


class TorchOps(unittest.TestCase):
    def test_library_path_or_a_clear_import_error(self):
        import mqalogits.torch_ops as tops

        path = tops.library_path()
        if path is None:
            with self.assertRaisesRegex(ImportError, "built without the torch op library"):
                tops.load()
        else:
            self.assertTrue(os.path.isfile(path))


if __name__ == "__main__":
    unittest.main()
