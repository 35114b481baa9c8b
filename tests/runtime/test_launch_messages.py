"""What a launch says about arguments that do not fit the kernel's parameters (LaunchError, before any compile)."""
from __future__ import annotations

import pytest
import torch

import tle
from tle.runtime.kernel import LaunchError

SCALE = """kernel scale<T: dtype = f32>(x: tensor<T>[N], gamma: tensor<T>[N], n: i32) {
    store(x, load(x, tile=[16]) * load(gamma, tile=[16]))
}
"""


def test_a_tensor_of_another_type_than_a_dtype_constant_names_where_the_type_came_from():
    k = tle.compile(SCALE).scale
    with pytest.raises(LaunchError, match=r"parameter 'gamma' is a tensor<bf16>\[N\] \(T = bf16, as 'x' is\); got a "
                                          r"tensor of torch.float32 \(convert it with .to\(torch.bfloat16\)\)"):
        k[(1,)](torch.randn(16).bfloat16(), torch.randn(16), 16, backend="interp")
    with pytest.raises(LaunchError, match=r"parameter 'x' is a tensor<f32>\[N\]; got a tensor of torch.bfloat16"):
        k[(1,)](torch.randn(16).bfloat16(), torch.randn(16), 16, T=torch.float32, backend="interp")


def test_a_scalar_of_the_wrong_kind_is_named_with_its_article():
    k = tle.compile(SCALE).scale
    with pytest.raises(LaunchError, match=r"parameter 'n' is an i32 scalar; got 1.5"):
        k[(1,)](torch.randn(16), torch.randn(16), 1.5, backend="interp")


def test_a_zero_dim_tensor_passes_as_a_one_element_tensor():
    src = """kernel dyt(x: tensor<f32>[M, N], alpha: tensor<f32>[1], y: tensor<f32>[M, N]) {
        let a = load(alpha, at=0)
        store(y, tanh(load(x, tile=[1, 8], at=[program_id(0), 0]) * a), at=[program_id(0), 0])
    }"""
    k = tle.compile(src).dyt
    x = torch.randn(3, 8)
    y = torch.empty_like(x)
    k[(3,)](x, torch.tensor(0.5), y, backend="interp")
    assert torch.allclose(y, torch.tanh(x * 0.5))
    with pytest.raises(LaunchError, match=r"parameter 'x' is a tensor<f32>\[M, N\] \(2 dims\); got a tensor of "
                                          r"shape \(\)"):
        k[(3,)](torch.tensor(1.0), torch.tensor(0.5), y, backend="interp")
