"""runtime/launch.py without a GPU: the module imports, and the per-kernel argument packer converts and checks.

(The launches themselves are in tests/gpu/test_launch_raw.py.)
"""

import pytest
import torch

from tle.runtime import launch as launch_mod


def test_launch_module_imports_without_cuda_bindings():
    import importlib.util
    assert launch_mod.load and launch_mod.LoadedKernel
    if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.bindings") is None:
        with pytest.raises(ImportError):
            launch_mod._driver()  # imported only when a kernel is loaded


@pytest.mark.parametrize("value", [0.0, 1.0, -2.5, 65504.0, 1e-5, 3.14159, float("inf")])
def test_half_bits_match_torch(value):
    for kind, dtype in [("f16", torch.float16), ("bf16", torch.bfloat16)]:
        expected = torch.tensor([value], dtype=torch.float32).to(dtype).view(torch.int16).item() & 0xFFFF
        assert launch_mod._half_bits(value, kind) == expected, (kind, value)


def _pack(params):
    slots = [launch_mod._SLOT_TYPES[p]() for p in params]
    return launch_mod._packer("k", params, slots), slots


def test_packer_writes_each_kind_and_checks_what_ctypes_would_not():
    pack, slots = _pack(["ptr", "ptr", "i1", "i8", "i32", "i64", "f16", "bf16", "f32", "f64"])
    pack([0x1000, None, True, -128, 0xFFFFFFFF, -(1 << 63), 1.5, 1.5, 2, 0.25])
    assert [s.value for s in slots] == [0x1000, 0, 1, -128, -1, -(1 << 63), 0x3E00, 0x3FC0, 2.0, 0.25]
    with pytest.raises(TypeError, match="kernel k takes 10 arguments"):
        pack([0])
    with pytest.raises(TypeError, match="kernel k: argument 1 must be a CUDA tensor, an address or None, got Tensor on cpu"):
        pack([0, torch.zeros(2), 1, 1, 1, 1, 1.0, 1.0, 1.0, 1.0])
    with pytest.raises(OverflowError, match="kernel k: argument 4 = 4294967296 does not fit i32"):
        pack([0, 0, 1, 1, 1 << 32, 1, 1.0, 1.0, 1.0, 1.0])
    with pytest.raises(OverflowError, match="argument 2 = 2 does not fit i1"):
        pack([0, 0, 2, 1, 1, 1, 1.0, 1.0, 1.0, 1.0])
    with pytest.raises(TypeError):
        pack([0, 0, 1, 1, 1.5, 1, 1.0, 1.0, 1.0, 1.0])  # a float for an integer
    with pytest.raises(TypeError, match="argument 8 must be a number"):
        pack([0, 0, 1, 1, 1, 1, 1.0, 1.0, "x", 1.0])


def test_packer_without_parameters():
    pack, _ = _pack([])
    pack([])
    with pytest.raises(TypeError, match="takes 0 arguments"):
        pack([1])
