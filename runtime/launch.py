"""Launching a Binary's cubin on the GPU through the CUDA driver API (cuda.bindings.driver).

    kernel = load(binary)                        # cuModuleLoadData + cuModuleGetFunction, once
    kernel.launch((grid_x, 1, 1), [x, y, out, n])  # cuLaunchKernel on the current torch stream

The arguments are the Binary's explicit parameters in order: a torch CUDA tensor, an int address or None for "ptr";
Python ints for integer types; floats for float types. What a backend adds behind them (Triton 3.6 appends a
global-scratch and a profile-scratch pointer to every kernel) is described by `binary.extra["scratch"]` and filled
in here, and so is the launch grid of a persistent Tile IR kernel (`binary.extra["persistent"]`: it takes the grid
as three i32 parameters after the caller's, and is started as one wave of programs that walk that grid). The
block size is `binary.num_threads`, never guessed: Tile IR cubins fail to launch with any other.

The host path is kept lean, because kernel launch latency is a tle goal: the `void*[]` array that cuLaunchKernel
reads and one ctypes slot per parameter are built once per LoadedKernel; a launch writes the values into the
slots and passes the array's address. A LoadedKernel is therefore not thread-safe. It belongs to the CUDA device
(and the CUDA context) that was current when it was loaded.

`mod.k[grid](...)` does not come through here on a repeated launch: `LoadedKernel.fast_plan` describes the
function, its block and its parameters to the C launcher of runtime/fastlaunch.py, which packs the parameters on
the C stack and calls cuLaunchKernel itself. Kernels with scratch buffers or cuLaunchKernelEx attributes always
launch here.

cuda.bindings is imported lazily, so this module imports on machines without CUDA.
"""
from __future__ import annotations

import ctypes
import math
import operator
import struct
import weakref

from tle.targets.binary import Binary
from tle.types import ROUNDS_TO_INF, overflows

_F32_INF = ROUNDS_TO_INF["f32"]  # the least value that rounds to inf in f32

_STATIC_SMEM_LIMIT = 48 * 1024  # above this, dynamic shared memory must be opted into per function

_SLOT_TYPES = {
    "ptr": ctypes.c_uint64, "i1": ctypes.c_uint8, "i8": ctypes.c_int8, "i16": ctypes.c_int16,
    "i32": ctypes.c_int32, "i64": ctypes.c_int64, "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16,
    "f32": ctypes.c_float, "f64": ctypes.c_double,
}
_INT_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}


def _driver():
    from cuda.bindings import driver
    return driver


def _check(result, what: str, kernel: str):
    """cuda.bindings returns (CUresult, *values); raise on any error, naming the kernel."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err:  # CUresult is an int enum; CUDA_SUCCESS is 0
        cu = _driver()
        _, name = cu.cuGetErrorName(err)
        _, text = cu.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else name
        text = text.decode() if isinstance(text, bytes) else text
        raise RuntimeError(f"kernel {kernel}: {what} failed: {name} ({text})")
    return values[0] if len(values) == 1 else values


def _ensure_context(device: int, kernel: str) -> None:
    """Make `device`'s primary context current (the one torch uses), unless it already is."""
    cu = _driver()
    _check(cu.cuInit(0), "cuInit", kernel)
    current = _check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent", kernel)
    if int(current) == 0 or int(_check(cu.cuCtxGetDevice(), "cuCtxGetDevice", kernel)) != device:
        dev = _check(cu.cuDeviceGet(device), "cuDeviceGet", kernel)
        ctx = _check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain", kernel)
        _check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", kernel)


def _half_bits(value: float, kind: str) -> int:
    if kind == "f16":
        return struct.unpack("<H", struct.pack("<e", value))[0]
    bits = struct.unpack("<I", struct.pack("<f", value))[0]  # bf16: f32 rounded to nearest even, top 16 bits
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return (bits >> 16) | 0x40  # keep a NaN a NaN
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


class _Arguments:
    """Slow-path conversions for one kernel's arguments: anything but a CUDA tensor, a plain int or a float."""

    def __init__(self, kernel: str, params: list[str]):
        self.kernel, self.params = kernel, params

    def wrong_count(self, args) -> None:
        raise TypeError(f"kernel {self.kernel} takes {len(self.params)} arguments ({', '.join(self.params)}), "
                        f"got {len(args)}")

    def address(self, arg, index: int) -> int:
        if arg is None:
            return 0
        if isinstance(arg, int):
            return arg
        if getattr(arg, "is_cuda", False):  # tensor subclasses
            return arg.data_ptr()
        where = f" on {arg.device}" if hasattr(arg, "device") else ""
        raise TypeError(f"kernel {self.kernel}: argument {index} must be a CUDA tensor, an address or None, "
                        f"got {type(arg).__name__}{where}")

    def integer(self, arg, index: int) -> int:
        kind = self.params[index]
        bits = _INT_BITS[kind]
        value = operator.index(arg)
        # Signless integers: accept the signed and the unsigned range of the width.
        low, high = (0, 1) if bits == 1 else (-(1 << (bits - 1)), (1 << bits) - 1)
        if not low <= value <= high:
            raise OverflowError(f"kernel {self.kernel}: argument {index} = {value} does not fit {kind}")
        return value

    def real(self, arg, index: int) -> float:
        try:
            value = float(arg)
        except (TypeError, ValueError):
            raise TypeError(f"kernel {self.kernel}: argument {index} must be a number ({self.params[index]}), "
                            f"got {type(arg).__name__}") from None
        if overflows(value, self.params[index]):  # 1e300 as an f32 would pass on as inf
            raise OverflowError(f"kernel {self.kernel}: argument {index} = {value!r} does not fit "
                                f"{self.params[index]}")
        return value

    def half(self, arg, index: int) -> int:
        return _half_bits(self.real(arg, index), self.params[index])


def _packer(kernel: str, params: list[str], slots: list):
    """`pack(args)`: writes the arguments into their ctypes slots.

    Generated per kernel as straight-line code with a fast path per argument (CUDA tensor, plain int in range,
    float), because this runs on every launch and a loop over per-argument closures cost several times more
    (launch overhead is a tle goal). Everything else goes through _Arguments, which converts or raises.
    """
    slow = _Arguments(kernel, params)
    names = [f"a{i}" for i in range(len(params))]
    lines = ["def pack(args):", f"    if len(args) != {len(params)}:", "        slow.wrong_count(args)"]
    if params:
        lines.append(f"    {', '.join(names)}, = args")
    for i, (kind, a) in enumerate(zip(params, names)):
        if kind == "ptr":
            value = f"{a}.data_ptr() if {a}.__class__ is Tensor and {a}.is_cuda else slow.address({a}, {i})"
        elif kind in _INT_BITS:
            bits = _INT_BITS[kind]
            low, high = (0, 1) if bits == 1 else (-(1 << (bits - 1)), (1 << bits) - 1)
            value = f"{a} if {a}.__class__ is int and {low} <= {a} <= {high} else slow.integer({a}, {i})"
        elif kind in ("f16", "bf16"):
            value = f"slow.half({a}, {i})"
        elif kind == "f32":  # a float that rounds to inf in f32 (1e300), an infinity and NaN: slow.real decides
            value = f"{a} if {a}.__class__ is float and -{_F32_INF!r} < {a} < {_F32_INF!r} else slow.real({a}, {i})"
        else:
            value = f"{a} if {a}.__class__ is float else slow.real({a}, {i})"
        lines.append(f"    s{i}.value = {value}")
    import torch
    scope = {"slow": slow, "Tensor": torch.Tensor, **{f"s{i}": slot for i, slot in enumerate(slots)}}
    exec("\n".join(lines), scope)
    return scope["pack"]


def _launch_attributes(binary: Binary) -> list:
    """cuLaunchKernelEx attributes the Binary asks for (Triton: a cluster of num_ctas CTAs per program)."""
    cu = _driver()
    attrs = []
    num_ctas = binary.extra.get("num_ctas", 1)
    if num_ctas > 1:
        cluster = cu.CUlaunchAttribute()
        cluster.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        cluster.value.clusterDim.x, cluster.value.clusterDim.y, cluster.value.clusterDim.z = num_ctas, 1, 1
        spread = cu.CUlaunchAttribute()
        spread.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
        spread.value.clusterSchedulingPolicyPreference = cu.CUclusterSchedulingPolicy.CU_CLUSTER_SCHEDULING_POLICY_SPREAD
        attrs += [cluster, spread]
    if binary.extra.get("launch_cooperative_grid"):
        coop = cu.CUlaunchAttribute()
        coop.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        coop.value.cooperative = 1
        attrs.append(coop)
    if binary.extra.get("launch_pdl"):
        pdl = cu.CUlaunchAttribute()
        pdl.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        pdl.value.programmaticStreamSerializationAllowed = 1
        attrs.append(pdl)
    return attrs


class LoadedKernel:
    """A Binary's function loaded into the current CUDA context, with its argument packing built once."""

    def __init__(self, binary: Binary, device: int):
        cu = _driver()
        # No reference to the Binary itself: launch()'s cache entry is dropped when the Binary is collected.
        self.name, self.params, self.device = binary.name, list(binary.params), device
        _ensure_context(device, self.name)
        self._context = int(_check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent", self.name))  # the module's context
        self._module = _check(cu.cuModuleLoadData(binary.cubin), "cuModuleLoadData", self.name)
        self._function = _check(cu.cuModuleGetFunction(self._module, binary.name.encode()),
                                "cuModuleGetFunction", self.name)
        self._check_limits(binary)

        # One slot per parameter, explicit ones first, then the backend's scratch pointers; argv points at them.
        scratch = binary.extra.get("scratch", [])
        kinds = list(binary.params) + ["ptr"] * len(scratch)
        self._num_explicit = len(binary.params)
        self._slots = [_SLOT_TYPES[k]() for k in kinds]
        self._argv = (ctypes.c_void_p * max(1, len(kinds)))(*[ctypes.addressof(s) for s in self._slots])
        self._argv_address = ctypes.addressof(self._argv)
        self._pack = _packer(self.name, self.params, self._slots[:self._num_explicit])
        # A scratch pointer stays null when the kernel needs none (the usual case); only the others cost a launch.
        self._scratch = [(slot, s["size"], s["align"]) for slot, s in zip(self._slots[self._num_explicit:], scratch)
                         if s["size"] > 0]
        self._scratch_buffers: list = []  # kept until the next launch; torch frees them in stream order

        self._num_ctas = binary.extra.get("num_ctas", 1)
        # Tile IR cubins record the exact block shape they require (.reqntid); Triton's is num_warps * 32.
        self._block = tuple(binary.extra.get("reqntid") or (binary.num_threads, 1, 1))
        self._shared = binary.shared_mem
        # A persistent kernel (Binary.extra["persistent"]) takes the launch grid behind the caller's arguments and is
        # started as one wave: as many programs as the device holds at once, each walking the grid's programs.
        self._wave = self._one_wave(cu) if binary.extra.get("persistent") else None
        attrs = _launch_attributes(binary)
        self._config = None
        self._fast_plans = weakref.WeakSet()  # C launcher plans of this function (fast_plan), disabled by unload()
        if attrs:  # clusters etc. need cuLaunchKernelEx; the config is built once and mutated per launch
            self._config = cu.CUlaunchConfig()
            self._config.blockDimX, self._config.blockDimY, self._config.blockDimZ = self._block
            self._config.sharedMemBytes = self._shared
            self._config.attrs = attrs
            self._config.numAttrs = len(attrs)
        self._launch_kernel = cu.cuLaunchKernel
        self._launch_kernel_ex = cu.cuLaunchKernelEx
        stream_of = _stream_query()
        self._current_stream = lambda: stream_of(device)

    def _one_wave(self, cu) -> int:
        """Programs of this function the device runs at once: resident programs per SM (the driver's occupancy
        calculator, from the cubin's registers and shared memory) times the SM count."""
        per_sm = _check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(self._function, math.prod(self._block),
                                                                       self._shared), "cuOccupancy", self.name)
        dev = _check(cu.cuDeviceGet(self.device), "cuDeviceGet", self.name)
        sms = _check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                     "cuDeviceGetAttribute", self.name)
        return max(1, per_sm) * sms

    def _check_limits(self, binary: Binary) -> None:
        cu, name = _driver(), self.name
        attr = cu.CUfunction_attribute
        max_threads = _check(cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, self._function),
                             "cuFuncGetAttribute", name)
        if binary.num_threads > max_threads:
            raise RuntimeError(f"kernel {name}: needs {binary.num_threads} threads per block, "
                               f"the compiled function allows {max_threads} (too many registers?)")
        if binary.shared_mem > _STATIC_SMEM_LIMIT:
            dev = _check(cu.cuDeviceGet(self.device), "cuDeviceGet", name)
            optin = _check(cu.cuDeviceGetAttribute(
                cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
                "cuDeviceGetAttribute", name)
            static = _check(cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, self._function),
                            "cuFuncGetAttribute", name)
            if binary.shared_mem + static > optin:
                raise RuntimeError(f"kernel {name}: needs {binary.shared_mem + static} bytes of shared memory, "
                                   f"the device allows {optin}")
            _check(cu.cuFuncSetAttribute(self._function, attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         binary.shared_mem), "cuFuncSetAttribute", name)
        if binary.extra.get("num_ctas", 1) > 8:  # clusters above 8 CTAs are "non-portable" and must be allowed
            _check(cu.cuFuncSetAttribute(self._function, attr.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                   "cuFuncSetAttribute", name)

    def _fill_scratch(self, programs: int, stream: int, stream_given: bool) -> None:
        import torch
        self._scratch_buffers = []
        for slot, size, align in self._scratch:
            buf = torch.empty(programs * self._num_ctas * size + align, dtype=torch.uint8, device=self.device)
            if stream_given:  # allocated on torch's current stream, used on another one
                buf.record_stream(torch.cuda.ExternalStream(stream, device=self.device))
            slot.value = -(-buf.data_ptr() // align) * align
            self._scratch_buffers.append(buf)

    def launch(self, grid: tuple[int, int, int], args, stream: int | None = None) -> None:
        """Launch on `grid` programs with the explicit arguments `args`, on `stream` (default: torch's current).
        A persistent kernel gets the grid as three more arguments and runs on one wave of programs."""
        gx, gy, gz = grid
        if self._wave is not None:
            args = [*args, gx, gy, gz]
            gx, gy, gz = min(gx * gy * gz, self._wave), 1, 1
        self._pack(args)
        if gx * gy * gz == 0:
            return
        stream_given = stream is not None
        if not stream_given:
            stream = self._current_stream()
        if self._scratch:
            self._fill_scratch(gx * gy * gz, stream, stream_given)
        if self._config is None:
            err, = self._launch_kernel(self._function, gx * self._num_ctas, gy, gz, *self._block,
                                       self._shared, stream, self._argv_address, 0)
        else:
            config = self._config
            config.gridDimX, config.gridDimY, config.gridDimZ = gx * self._num_ctas, gy, gz
            config.hStream = stream
            err, = self._launch_kernel_ex(config, self._function, self._argv_address, 0)
        if err:
            _check((err,), "cuLaunchKernel", self.name)

    def fast_plan(self, sources, nargs: int, grid: tuple | None = None):
        """The C launcher's plan for this kernel (runtime/fastlaunch.py), or None where it cannot launch it.

        `sources` gives each explicit parameter's origin: ("arg", i) for the i-th of `nargs` positional arguments,
        or ("fixed", int) for a value fixed by the launch plan (a size, a stride). Kernels that need scratch
        buffers or cuLaunchKernelEx attributes (clusters, ...) stay on launch(). A persistent kernel's plan is
        for one `grid` (3 ints; the C launcher keeps its plans per grid): the grid is fixed in its parameters and
        the plan launches one wave instead."""
        from . import fastlaunch
        ext = fastlaunch.extension()
        if ext is None or self._config is not None or self._scratch or self._num_ctas != 1 or self._function is None:
            return None
        wave = (0, 0, 0)  # the launcher's own grid
        if self._wave is not None:
            if grid is None:
                return None
            sources = [*sources, *(("fixed", g) for g in grid)]
            wave = (min(math.prod(grid), self._wave), 1, 1)
        kinds = list(self.params) + ["ptr"] * (len(self._slots) - self._num_explicit)
        origins = list(sources) + [("fixed", 0)] * (len(self._slots) - self._num_explicit)  # null scratch pointers
        if len(sources) != self._num_explicit or len(kinds) > fastlaunch.MAX_SLOTS or \
                any(k not in fastlaunch.KINDS for k in kinds):
            return None
        codes, where, fixed = [], [], []
        for kind, (origin, value) in zip(kinds, origins):
            codes.append(fastlaunch.KINDS[kind])
            if origin == "arg":
                where.append(value)
                fixed.append(0)
            elif type(value) is int and kind in _INT_BITS or (kind == "ptr" and value == 0):
                where.append(-1)
                fixed.append(value & 0xFFFFFFFFFFFFFFFF)
            else:  # fixed floats do not occur (sizes and strides are ints); keep such a kernel on launch()
                return None
        import functools
        import torch
        ext.load_driver()
        ext.set_single_device(torch.cuda.device_count() == 1)  # then keys need no tensor.get_device()
        plan = ext.Plan(int(self._function), self._context, self._block, self._shared, self.device, nargs, codes,
                        where, fixed, _stream_query(), functools.partial(_launch_failed, self.name), self, grid=wave)
        self._fast_plans.add(plan)
        return plan

    def unload(self) -> None:
        """Free the module now (optional; a module otherwise lives as long as its context)."""
        if self._module is not None:
            for plan in self._fast_plans:
                plan.disable()
            _check(_driver().cuModuleUnload(self._module), "cuModuleUnload", self.name)
            self._module = self._function = None


def _stream_query():
    """device index -> torch's current raw stream on it: torch's own query (what Triton's launcher uses; the public
    one builds a Stream object), else the public one."""
    import torch
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw_stream if raw_stream is not None else (lambda d: torch.cuda.current_stream(d).cuda_stream)


def _launch_failed(kernel: str, err: int) -> None:
    """The C launcher's cuLaunchKernel failed: raise what launch() raises for the same error."""
    cu = _driver()
    try:
        err = cu.CUresult(err)
    except ValueError:
        pass
    _check((err,), "cuLaunchKernel", kernel)


def load(binary: Binary, device: int | None = None) -> LoadedKernel:
    """Load `binary` on `device` (default: torch's current CUDA device)."""
    import torch
    return LoadedKernel(binary, torch.cuda.current_device() if device is None else device)


_loaded: dict[tuple[int, int], LoadedKernel] = {}


def launch(binary: Binary, grid: tuple[int, int, int], args, stream: int | None = None) -> None:
    """Load `binary` on first use (once per device) and launch it; see LoadedKernel.launch."""
    import torch
    key = (id(binary), torch.cuda.current_device())
    kernel = _loaded.get(key)
    if kernel is None:
        kernel = _loaded[key] = load(binary, key[1])
        weakref.finalize(binary, _loaded.pop, key, None)
    kernel.launch(grid, args, stream)
