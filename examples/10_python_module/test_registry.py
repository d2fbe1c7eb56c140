#!/usr/bin/env python3
"""The two surfaces one declaration per op generates (examples/op_registry): every torch op of
the op library is a function of the Python module with the same arguments in the same order,
the same defaults and the same keyword-only marker; the Python module's own arguments (its
thread count, and the few the torch ops leave to torch) are keyword-only with defaults.

Usage: test_registry.py OPS_LIBRARY   (the package on PYTHONPATH; torch imports)
"""
import inspect
import sys
import unittest

import torch

import mqalogits as ml

OPS_LIBRARY = sys.argv.pop(1)
NAMESPACE = "mqalogits"


def torch_schemas():
    torch.ops.load_library(OPS_LIBRARY)
    return {s.name.split("::", 1)[1]: s for s in torch._C._jit_get_all_schemas()
            if s.name.startswith(NAMESPACE + "::")}


# torch's ScalarType codes (torch 1.13 reports a ScalarType argument as an int, its default as
# the code).
SCALAR_TYPES = {5: "float16", 6: "float32", 15: "bfloat16"}


def same_default(torch_arg, py_param):
    """A schema default against the Python one: a ScalarType's default is a dtype (or its code)
    there, its name here; the rest are the same value."""
    want = torch_arg.default_value
    got = py_param.default
    if isinstance(want, torch.dtype) or (type(want) is int and isinstance(got, str)):
        name = SCALAR_TYPES.get(want) if isinstance(want, int) else str(want).split(".")[-1]
        return got == name
    return want == got and type(want) is type(got)


class Registry(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.schemas = torch_schemas()

    def test_every_op_is_a_python_function(self):
        self.assertGreaterEqual(len(self.schemas), 16)
        for name in self.schemas:
            self.assertTrue(callable(getattr(ml, name, None)), name)

    def test_arguments_agree(self):
        for name, schema in self.schemas.items():
            with self.subTest(op=name):
                params = list(inspect.signature(getattr(ml, name)).parameters.values())
                by_name = {p.name: p for p in params}
                order = []
                for arg in schema.arguments:
                    self.assertIn(arg.name, by_name)
                    p = by_name[arg.name]
                    order.append(params.index(p))
                    self.assertEqual(arg.kwarg_only, p.kind is p.KEYWORD_ONLY, arg.name)
                    self.assertEqual(arg.has_default_value(), p.default is not p.empty, arg.name)
                    if p.default is not p.empty:
                        self.assertTrue(same_default(arg, p),
                                        f"{arg.name}: {arg.default_value!r} vs {p.default!r}")
                self.assertEqual(order, sorted(order), "the arguments' order differs")
                torch_names = {a.name for a in schema.arguments}
                for p in params:
                    if p.name not in torch_names:  # the Python module's own
                        self.assertIs(p.kind, p.KEYWORD_ONLY, p.name)
                        self.assertIsNot(p.default, p.empty, p.name)


if __name__ == "__main__":
    unittest.main(verbosity=1)
