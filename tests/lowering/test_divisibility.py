"""Divisibility facts below 16 (tle/abi.py): dims and strides carry the largest power of two under 16 that divides
them, so that a row of f32 at a stride of 1000 elements (4000 bytes, 16-byte aligned) is known to be; scalars keep
the 16-or-nothing rule; and a spec without such facts keeps the key it had before them."""
from __future__ import annotations

import torch

from tle.abi import Spec, default_spec, launch_spec, partial_divisor, spec_of
from tle.check import check_kernel, load_program
from tle.lowering.ast_to_tle import ast_to_tle
from tle.lowering.tle_to_ttir import tle_to_ttir

SCALE = """
kernel scale(x: tensor<f32>[M, N], y: tensor<f32>[M, N], k: i32) {
    let row = program_id(0)
    store(y, load(x, tile=[1, 1024], at=[row, 0]) * cast<f32>(k), at=[row, 0])
}
"""


def kernel():
    return check_kernel(load_program(SCALE, "k.tle"), "scale", {})


def values(m, n, x_stride, k):
    x = torch.empty(m, x_stride)[:, :n]
    return {"x": x, "M": m, "N": n, "x.stride0": x_stride, "x.stride1": 1, "y": torch.empty(m, n),
            "y.stride0": n, "y.stride1": 1, "k": k}


def test_partial_divisor_is_the_power_of_two_under_16():
    assert [partial_divisor(v) for v in (1000, 1004, 1002, 1001, 1024, 48, 0, -8)] == [8, 4, 2, None, None, None,
                                                                                       None, None]


def test_dims_and_strides_carry_it_scalars_do_not():
    spec = spec_of(kernel(), values(64, 1000, 1004, 1000))
    assert spec.divisibility("N") == 8 and spec.divisibility("x.stride0") == 4 and spec.divisibility("y.stride0") == 8
    assert spec.divisibility("M") == 16 and spec.divisibility("k") == 1  # k = 1000 is a scalar: 16 or nothing


def test_a_spec_without_such_facts_keeps_its_key():
    spec = spec_of(kernel(), values(64, 1024, 1024, 7))
    assert spec.divisible == frozenset()
    assert spec.key() == Spec(spec.divisible16, spec.unit_strides, spec.inside).key()
    assert ";div=" in spec_of(kernel(), values(64, 1000, 1000, 7)).key()


def test_the_ttir_carries_the_divisor():
    k = kernel()
    text = tle_to_ttir(ast_to_tle(k, launch_spec(k, {"M": 4096, "N": 1000})))
    assert text.count("tt.divisibility = 8 : i32") == 3  # N, x's and y's row strides
    assert "tt.divisibility = 8" not in tle_to_ttir(ast_to_tle(k, default_spec(k)))
