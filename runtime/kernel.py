"""Kernels as Python callables: argument binding and checks, specialisation, caches, launch.

    mod = tle.compile("softmax.tle")
    mod.softmax[(M,)](x, y, BLOCK=1024)

A call binds tensors and scalars to the kernel's parameters, reads the symbolic dims off the tensors' shapes,
and checks everything a GPU would otherwise fault on (device, dtype, rank, dims that disagree) with an exception
naming the parameter. It then derives the specialisation (tle/abi.py: 16-byte alignment, divisibility by 16,
unit strides), finds or builds the binary for it (memory cache, then the disk cache of runtime/cache.py, then the
compiler), and launches it: CUDA tensors on a GPU backend, CPU tensors on the interpreter.
"""
from __future__ import annotations

import functools
import logging
import numbers
import operator
import os
import warnings
from dataclasses import dataclass

from .. import __version__ as TLE_VERSION
from .. import debug
from ..abi import Spec, abi, byte_span, spec_of
from ..check import OCCUPANCIES, Program, check_kernel
from ..diagnostics import TleError, user_facing, without_internal_frames
from ..types import overflows
from . import cache

LAUNCH_OPTIONS = ("num_warps", "num_stages", "backend", "occupancy", "asserts")
NUM_WARPS = (1, 2, 4, 8, 16, 32)  # at most 1024 threads a program
NUM_STAGES = range(1, 9)


@functools.cache
def _torch_dtypes() -> dict:
    """tle element type -> torch dtype (torch is imported on first use, not at start-up)."""
    import torch
    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
            "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64, "i1": torch.bool,
            "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2}


@functools.cache
def _tle_dtypes() -> dict:
    return {t: d for d, t in _torch_dtypes().items()}


def torch_dtype(dtype: str):
    return _torch_dtypes()[dtype]


def tle_dtype(torch_dt) -> str | None:
    return _tle_dtypes().get(torch_dt)


class LaunchError(TypeError):
    """A launch whose arguments do not fit the kernel (raised before anything reaches the GPU)."""


def _whole(g) -> int:
    """A grid size as an int: an int, numpy's or a 0-d integer tensor, or a float that is a whole number. A float
    with a fraction (`N / BLOCK`) is an error: int() would round it down and drop the last, partial tile."""
    if isinstance(g, bool):  # a compare's result is no count (int(True) would launch one program)
        raise LaunchError(f"a grid of {g!r} programs: a grid size is an int, not a bool")
    if isinstance(g, float):
        if g != g or g in (float("inf"), float("-inf")):
            raise LaunchError(f"a grid of {g} programs: a grid size is a whole number")
        if not g.is_integer():
            raise LaunchError(f"a grid of {g} programs: a float with a fraction would be rounded down, dropping the "
                              "last, partial tile; round up with triton.cdiv(N, BLOCK) or (N + BLOCK - 1) // BLOCK")
        return int(g)
    return operator.index(g)


class TleFallbackWarning(UserWarning):
    """backend="auto" could not take the Tile IR path for a kernel and used the native CUDA path."""


@dataclass
class _Entry:
    compiled: object  # tle.compiler.Compiled
    runner: object  # a LoadedKernel, or the tle-dialect module for the interpreter


class Kernel:
    """One kernel of a compiled .tle file. Index it with a grid to launch: kernel[grid](*args, **constants)."""

    def __init__(self, program: Program, name: str, fingerprint: str, backend: str = "auto", quiet: bool = True,
                 arch: str | None = None, asserts: bool = False):
        self.program = program
        self.name = name
        self.decl = program.kernels[name]
        self.fingerprint = fingerprint
        self.backend = backend
        self.quiet = quiet
        self.arch = arch
        self.asserts = asserts  # the default of the `asserts` launch option (tle.compile(..., asserts=True))
        self._entries: dict = {}
        self._checked: dict = {}  # constants -> the checked kernel
        self._plans: dict = {}
        self._fast: dict = {}  # grid -> {the C launcher's key -> its plan} (runtime/fastlaunch.py); the launcher of
        # that grid holds the inner dict. Per grid because a plan may rely on its grid (tle/abi.py's grid facts).
        self._launchers: dict = {}  # grid -> kernel[grid]
        self.last_backend: str | None = None
        self._tune_space = None  # runtime/tuning.py: set through .tune_space
        self._tuned: dict = {}  # tuning key -> best configuration, for the buckets seen by this process
        self._prebuilt: dict = {}  # binary key -> Binary bytes compiled by tuning's workers, consumed on first use
        for p in [*self.decl.const_params, *self.decl.params]:
            if p.name in LAUNCH_OPTIONS:  # kernel[grid](..., backend=3) would set the option, never this
                kind = "constant" if p in self.decl.const_params else "parameter"
                raise TleError(p.span, f"{kind} '{p.name}' has the name of a launch option, so a launch could never "
                                       f"give it by name", [f"launch options: {', '.join(LAUNCH_OPTIONS)}; rename "
                                                            f"the {kind}"])
        if getattr(self.decl, "tune", ()):  # the kernel's own tune(...) clause
            from ..check import tuning_space
            self.tune_space = tuning_space(self.decl)

    @property
    def tune_space(self):
        """A tuning.TuneSpace (or a dict of params): launches then tune on the first call per shape bucket."""
        return self._tune_space

    @tune_space.setter
    def tune_space(self, space):
        if space is not None:
            from .tuning import TuneSpace
            space = TuneSpace.coerce(space).validate(self.decl)
        self._tune_space = space
        self._plans.clear()
        for table in self._fast.values():
            table.clear()  # in place: the launchers hold these dicts
        self._tuned.clear()

    @user_facing
    def tune(self, grid, *args, force: bool = False, **kwargs):
        """Tune this launch's shape bucket now (or return its stored result unless force); nothing is launched
        and no argument is changed. Returns a tuning.TuneResult."""
        from .tuning import tune_kernel
        return tune_kernel(self, grid, args, kwargs, force=force)

    def __repr__(self) -> str:
        return f"<tle kernel {self.name} from {self.program.file}>"

    def __call__(self, *args, **kwargs):
        raise LaunchError(f"{self.name}() is launched with a grid: {self.name}[grid](...), e.g. "
                          f"{self.name}[(triton.cdiv(N, BLOCK),)](...) for one program per tile of a 1-D N")

    def __getitem__(self, grid):
        try:
            return self._launchers[grid]
        except (KeyError, TypeError):  # a new grid, or one that is no dict key (a list)
            return self._launcher(grid)

    MAX_LAUNCHERS = 1024

    def _launcher(self, grid):
        """kernel[grid]: the C launcher where it is available (runtime/fastlaunch.py), else the Python path."""
        from . import fastlaunch
        ext = fastlaunch.for_launch()
        launcher = (ext.Launcher(grid, self._fast_table(grid), self._launch_from_c) if ext is not None
                    else functools.partial(self.launch, grid))
        if type(grid) is tuple and len(self._launchers) < self.MAX_LAUNCHERS:
            try:
                self._launchers[grid] = launcher
            except TypeError:
                pass
        return launcher

    # ---- binding -------------------------------------------------------------------------------------------
    def _bind(self, args, kwargs):
        params = self.decl.params
        const_names = [c.name for c in self.decl.const_params]
        options = {k: kwargs.pop(k) for k in LAUNCH_OPTIONS if k in kwargs}
        constants = {k: kwargs.pop(k) for k in list(kwargs) if k in const_names}
        if len(args) > len(params):
            raise LaunchError(f"{self.name}() takes {len(params)} arguments "
                              f"({', '.join(p.name for p in params)}), got {len(args)}")
        values = dict(zip((p.name for p in params), args))
        for k, v in kwargs.items():
            if k not in {p.name for p in params}:
                import difflib
                close = difflib.get_close_matches(k, [p.name for p in params] + const_names + list(LAUNCH_OPTIONS),
                                                  n=1)
                raise LaunchError(f"{self.name}() has no parameter, constant or launch option '{k}'"
                                  + (f" (did you mean '{close[0]}'?)" if close else "") +
                                  f"; parameters: {', '.join(p.name for p in params)}; constants: "
                                  f"{', '.join(const_names) or 'none'}; launch options: {', '.join(LAUNCH_OPTIONS)}")
            if k in values:
                raise LaunchError(f"{self.name}() got parameter '{k}' twice")
            values[k] = v
        missing = [p.name for p in params if p.name not in values]
        if missing:
            raise LaunchError(f"{self.name}() is missing argument{'s' if len(missing) > 1 else ''} "
                              f"{', '.join(repr(m) for m in missing)}")
        # element-type constants (T: dtype) not given are read off the tensors declared with them
        for p in params:
            dname = p.type.dtype
            if dname in const_names and dname not in constants and hasattr(values[p.name], "dtype"):
                d = tle_dtype(values[p.name].dtype)
                if d is not None:
                    constants[dname] = d
        for k, v in list(constants.items()):
            if _numpy_scalar(v):  # BLOCK=np.int64(64), read off an array's shape
                constants[k] = v.item()
            elif not isinstance(v, (bool, int, float, str)):
                try:
                    d = tle_dtype(v)  # a torch dtype given for a dtype constant
                except TypeError:  # unhashable: a list, a tensor
                    d = None
                if d is None:
                    raise LaunchError(f"constant {k}={v!r}: expected an int, float, bool or element type")
                constants[k] = d
        for k, v in list(options.items()):
            if _numpy_scalar(v):
                options[k] = v.item()
        return values, constants, options

    def _read_off(self, name: str, dtype: str) -> str:
        """For a tensor parameter declared with a dtype constant, which earlier tensor has it (checked already: _bind
        reads T off the first tensor declared with it unless given): " (T = bf16, as 'x' is)". Empty otherwise."""
        params = {p.name: p for p in self.decl.params}
        dname = getattr(params[name].type, "dtype", None)
        if dname not in {c.name for c in self.decl.const_params}:
            return ""
        first = next(p.name for p in self.decl.params if getattr(p.type, "dtype", None) == dname)
        return f" ({dname} = {dtype}, as '{first}' is)" if first != name else ""

    def _check_args(self, kernel, values):
        """Check the arguments against the checked kernel; return (flat values by ABI key, device)."""
        import torch
        from ..typed import TensorParam, uses
        flat, dims, device, absent = {}, {}, None, []
        for p in kernel.params:
            v = values[p.name]
            if isinstance(p, TensorParam):
                if v is None:  # a tensor these constants never read (Liger's `HAS_LABEL=False` with no labels)
                    absent.append(p)
                    continue
                if not isinstance(v, torch.Tensor):
                    raise LaunchError(f"{self.name}: parameter '{p.name}' is a {p.type}; got {type(v).__name__}")
                if v.layout != torch.strided:
                    raise LaunchError(f"{self.name}: parameter '{p.name}' is a {v.layout} tensor; kernels read "
                                      f"dense (strided) ones: pass {p.name}.to_dense()")
                want = p.type.dtype
                if tle_dtype(v.dtype) != want:
                    # bool and unsigned tensors have signed twins of their width: a view, where a .to() copies
                    twin = {torch.bool: "i8", torch.uint8: "i8", torch.uint16: "i16", torch.uint32: "i32",
                            torch.uint64: "i64"}.get(v.dtype)
                    how = (f"pass {p.name}.view({torch_dtype(want)}): the same bytes, no copy" +
                           ("" if v.dtype == torch.bool else f"; read them as unsigned with "
                            f"cast<{'i32' if v.element_size() < 4 else 'i64'}>(x) & "
                            f"0x{(1 << (8 * v.element_size())) - 1:X}")
                           if twin == want else
                           # .to(float32) of a complex tensor drops its imaginary part: view its parts instead
                           f"pass torch.view_as_real({p.name}) as a tensor of [..., 2] ({{re, im}} pairs); no copy"
                           if v.is_complex() else f"convert it with .to({torch_dtype(want)})")
                    raise LaunchError(f"{self.name}: parameter '{p.name}' is a {p.type}{self._read_off(p.name, want)}; "
                                      f"got a tensor of {v.dtype} ({how})")
                if want == "i1":
                    raise LaunchError(f"{self.name}: parameter '{p.name}': bool tensors are not supported; "
                                      f"declare tensor<i8> and pass {p.name}.view(torch.int8) (the same bytes, no "
                                      "copy; a strided view too)")
                if v.dim() == 0 and len(p.type.dims) == 1:  # torch.tensor(0.5): the one-element tensor it holds
                    v = values[p.name] = v.reshape(1)
                if v.dim() != len(p.type.dims):
                    raise LaunchError(f"{self.name}: parameter '{p.name}' is a {p.type} ({len(p.type.dims)} dims); "
                                      f"got a tensor of shape {tuple(v.shape)}")
                if device is None:
                    device = v.device
                elif v.device != device:
                    raise LaunchError(f"{self.name}: parameter '{p.name}' is on {v.device} but earlier tensors "
                                      f"are on {device}; all tensors of a launch must be on one device")
                for axis, (d, size) in enumerate(zip(p.type.dims, v.shape)):
                    if isinstance(d, int):
                        if size != d:
                            raise LaunchError(f"{self.name}: parameter '{p.name}' must have size {d} in dim "
                                              f"{axis}; got shape {tuple(v.shape)}")
                    elif d in dims and dims[d][0] != size:
                        raise LaunchError(f"{self.name}: dim '{d}' is {dims[d][0]} (from '{dims[d][1]}') but "
                                          f"{size} in '{p.name}' (shape {tuple(v.shape)})")
                    else:
                        dims.setdefault(d, (size, p.name))
                if any(st < 0 for st in v.stride()):
                    raise LaunchError(f"{self.name}: tensor '{p.name}' has a negative stride")
                # Sizes, strides and offsets past 2^31 - 1 are passed and computed in i64 (tle/abi.py WideTensor,
                # WideDim); a kernel that reads such a dim's value is refused where it reads it (ast_to_tle).
                flat[p.name] = v
                for axis, st in enumerate(v.stride()):
                    flat[f"{p.name}.stride{axis}"] = st
            else:
                d = p.type.dtype
                if _numpy_scalar(v):  # np.float32(0.5), np.int64(3), np.bool_(True): the Python number they hold
                    v = v.item()
                if d == "i1":
                    ok = isinstance(v, bool)
                elif d.startswith("i"):
                    ok = isinstance(v, int) and not isinstance(v, bool)
                    if ok and not -(2 ** (int(d[1:]) - 1)) <= v < 2 ** (int(d[1:]) - 1):
                        raise LaunchError(f"{self.name}: scalar '{p.name}' = {v} does not fit {d}")
                else:
                    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
                    if ok and overflows(float(v), d):
                        raise LaunchError(f"{self.name}: scalar '{p.name}' = {v!r} does not fit {d}: it would round "
                                          f"to {'-' if v < 0 else ''}inf")
                if not ok:
                    shown = {"i1": "a bool", "bf16": "a bf16"}.get(d, f"an {d}")  # as read: an i8, an f32
                    raise LaunchError(self._scalar_mismatch(p.name, shown, d, v))
                flat[p.name] = v
        if absent:
            self._absent_tensors(kernel, absent, flat, dims, uses(kernel))
        for d, (size, _) in dims.items():
            flat[d] = size
        return flat, device, {d: s for d, (s, _) in dims.items()}

    def _scalar_mismatch(self, name: str, shown: str, dtype: str, v) -> str:
        """Why `v` does not pass as the scalar parameter `name`; for a 0-dim tensor, how to pass its value."""
        got = f"got {v!r}"
        if getattr(v, "dim", None) is not None and v.dim() == 0:
            return (f"{self.name}: parameter '{name}' is {shown} scalar; {got}, a 0-dim tensor: pass {name}.item(), "
                    f"or, where the value must stay on the device (a CUDA graph, a value the GPU computes), declare "
                    f"{name}: tensor<{'bool' if dtype == 'i1' else dtype}>[1] and read it with load({name}, at=0)")
        return f"{self.name}: parameter '{name}' is {shown} scalar; {got}"

    def _absent_tensors(self, kernel, absent, flat, dims, used) -> None:
        """Tensors passed as None: allowed where no operation of the kernel (under these constants) addresses them.
        Their pointers are null and their strides contiguous over the sizes the other tensors give; a dim that only
        they give is 1, unless the kernel reads its value."""
        tensors, dims_read = used
        for p in absent:
            if p.name in tensors:
                raise LaunchError(f"{self.name}: parameter '{p.name}' is None, but the kernel reads or writes it "
                                  f"with these constants; pass a {p.type}")
            sizes = []
            for d in p.type.dims:
                if isinstance(d, int):
                    sizes.append(d)
                elif d in dims:
                    sizes.append(dims[d][0])
                elif d in dims_read:
                    raise LaunchError(f"{self.name}: dim '{d}' comes only from '{p.name}', which is None, and the "
                                      f"kernel reads its value; pass a {p.type}")
                else:
                    sizes.append(1)
                    dims[d] = (1, p.name)
            flat[p.name] = _NULL_TENSOR
            stride = 1
            for axis in reversed(range(len(sizes))):
                flat[f"{p.name}.stride{axis}"] = stride
                stride *= max(1, sizes[axis])

    @staticmethod
    def _spec(kernel, flat, grid=None, sms=None) -> Spec:
        return spec_of(kernel, flat, grid, sms)

    @staticmethod
    def _concrete_grid(grid):
        """The grid as 3 ints where it is given as numbers, so a plan may rely on it (tle/abi.py's grid facts);
        None where it is a callable, computed at each launch, or not a grid at all (the launch then says why)."""
        if type(grid) is tuple and 1 <= len(grid) <= 3 and all(type(g) is int for g in grid):  # the common cases
            return grid + (1,) * (3 - len(grid))  # (negative sizes: the launch says so)
        if callable(grid):
            return None
        try:
            return Kernel._grid(grid, None)
        except (LaunchError, TypeError, ValueError):
            return None

    def _fast_table(self, grid) -> dict:
        """The C plans of launches with this grid (a tuple: the only grids the C launcher takes)."""
        if type(grid) is not tuple:  # the C launcher sends such a grid to the Python path
            return {}
        try:
            return self._fast.setdefault(grid, {}) if len(self._fast) < self.MAX_LAUNCHERS else {}
        except TypeError:  # a tuple holding something unhashable: not a grid the C launcher takes either
            return {}

    # ---- launch --------------------------------------------------------------------------------------------
    # A launch is planned once per argument signature (dtypes, shapes, strides, alignment, device, constants) and
    # grid given as numbers: the plan holds the binary, specialised on what the arguments and the grid prove, and
    # knows which arguments to pass as they come and which sizes and strides are fixed for that signature. A
    # repeated launch only computes the signature and looks the plan up, so the host cost stays close to a raw
    # cuLaunchKernel (issue 5; benchmarks/bench.py measures it). On a GPU plan that lookup and the launch itself
    # are done in C by kernel[grid] (runtime/fastlaunch.py) from the second launch of a signature on;
    # kernel.launch(grid, ...) is the pure-Python path.
    MAX_PLANS = 4096

    def launch(self, grid, *args, **kwargs):
        try:
            self._planned(grid, args, kwargs)(grid, args, kwargs)
        except TleError as e:
            raise without_internal_frames(e) from e.__cause__
        except (OverflowError, TypeError, ValueError) as e:
            self._recheck(grid, args, kwargs, e)

    def _recheck(self, grid, args, kwargs, error: Exception):
        """A launch through a plan failed on a value the plan passes as it comes (an int past i32, a float for an
        int): the plan's signature holds the types, not the values, so it did not check them. Check the arguments
        as a first launch does, which raises the LaunchError naming the parameter; else the error as it was."""
        if not isinstance(error, LaunchError):
            try:
                self._plan(args, dict(kwargs), grid, tune=False)
            except TleError as e:
                raise without_internal_frames(e) from e.__cause__
        raise error

    def _planned(self, grid, args, kwargs):
        sig = _signature(args, kwargs)
        key = (sig, self._concrete_grid(grid)) if sig is not None else None
        plan = self._plans.get(key) if key is not None else None
        if plan is None:
            plan = self._plan(args, kwargs, grid)
            if key is not None and len(self._plans) < self.MAX_PLANS:
                self._plans[key] = plan
        return plan

    def _launch_from_c(self, grid, key, args, kwargs):
        """The C launcher's way back: launch on the Python path; after a successful launch, give the launcher the
        plan's C half under `key` (the launcher's key of these arguments; None: not one it can describe)."""
        try:
            plan = self._planned(grid, args, kwargs)
            plan(grid, args, kwargs)
        except TleError as e:
            raise without_internal_frames(e) from e.__cause__
        except (OverflowError, TypeError, ValueError) as e:
            self._recheck(grid, args, kwargs, e)
        table = self._fast_table(grid)
        if key is not None and len(table) < self.MAX_PLANS:
            fast = plan.fast
            if fast is not None:
                table[key] = fast

    def _plan(self, args, kwargs, grid=None, tune: bool = True):
        """Bind and check the arguments, compile (or fetch) the binary, and return a launcher for this signature.
        With a tuning space, the best configuration of the arguments' bucket is merged in first (tuning.py)."""
        if tune and self._tune_space is not None and grid is not None:
            from .tuning import configure
            kwargs = configure(self, grid, args, kwargs)
        values, constants, options = self._bind(args, dict(kwargs))
        kernel = self._checked_kernel(constants)
        flat, device, dims = self._check_args(kernel, values)
        on_gpu = device is not None and device.type == "cuda"
        backend = self._choose_backend(options.get("backend", self.backend), on_gpu)
        # The SM count only where Tile IR may compile the kernel: its ManyPrograms fact (tle/abi.py) steers only
        # that path's occupancy hint, so the native path's binaries do not split on the grid's size
        sms = _sm_count(device) if on_gpu and backend in ("tileir", "auto") else None
        meta = {**kernel.constants, **dims}
        # The grid the plan is made for, and whose facts it may use: a callable grid is worked out here from the sizes
        # and constants the plan is keyed by, and again at each launch, where a callable that gives another grid
        # sends the launch to that grid's own plan (so tuned kernels, whose grids are callables, get the grid facts)
        planned = self._concrete_grid(grid) if grid is not None else None
        from_callable = planned is None and callable(grid)
        if from_callable:
            planned = self._grid(grid, meta)
        if on_gpu and planned is not None:
            _within_cuda_grid(planned)
        spec = self._spec(kernel, flat, planned, sms)
        num_warps, num_stages, occupancy, asserts = self._compile_options(options)
        entry = self._entry(kernel, constants, spec, backend, device, num_warps, num_stages, occupancy, asserts)
        self.last_backend = entry.compiled.backend
        # Where each ABI argument comes from: the caller's argument (pointers, scalars) or a fixed value.
        names = [p.name for p in self.decl.params]
        sources = []
        for a in entry.compiled.abi:
            if a.kind in ("ptr", "scalar"):
                i = names.index(a.name)
                sources.append((i, a.name, None))
            else:
                sources.append((None, None, flat[a.key]))

        def gather(args, kwargs):
            return [(args[i] if i < len(args) else kwargs[n]) if i is not None else v for i, n, v in sources]
        # numpy scalars go to the launchers and the interpreter as the Python numbers they hold (a plan's
        # signature names each argument's type, so every launch of this plan passes numpy scalars there)
        from_numpy = [k for k, (i, n, _) in enumerate(sources) if i is not None and _numpy_scalar(values[n])]
        if from_numpy:
            gather_as_given = gather

            def gather(args, kwargs):
                ordered = gather_as_given(args, kwargs)
                for k in from_numpy:
                    ordered[k] = ordered[k].item()
                return ordered
        nargs = len(args)

        grid_of = self._grid
        if backend == "interp":
            from .interpreter import interpret

            def run(grid, args, kwargs):
                ordered = gather(args, kwargs)
                if on_gpu:  # a forced interpreter run on CUDA tensors works on copies and writes back
                    cpu = [v.cpu() if hasattr(v, "cpu") else v for v in ordered]
                    interpret(entry.runner, grid_of(grid, meta), cpu)
                    for g, c in zip(ordered, cpu):
                        if hasattr(g, "copy_"):
                            g.copy_(c)
                else:
                    interpret(entry.runner, grid_of(grid, meta), ordered)
            run.fast = None
        else:
            import torch
            runner, index = entry.runner, device.index

            def run(grid, args, kwargs):
                ordered = gather(args, kwargs)
                g = grid_of(grid, meta)
                if torch.cuda.current_device() == index:
                    runner.launch(g, ordered)
                else:
                    with torch.cuda.device(index):
                        runner.launch(g, ordered)
            run.fast = None
            # the C launcher takes grids given as numbers only, so a callable grid's plan gets no C half
            if not from_callable and all(i is None or i < nargs for i, _, _ in sources):  # names stay in Python
                try:
                    run.fast = runner.fast_plan(
                        [("arg", i) if i is not None else ("fixed", v) for i, _, v in sources], nargs, planned)
                except Exception as exc:  # noqa: BLE001 - only costs speed
                    debug.note(f"kernel '{self.name}': no C launch plan ({type(exc).__name__}: {exc})")
        return self._checked_grid(run, planned, meta) if from_callable else run

    def _checked_grid(self, run, planned, meta):
        """`run` for a plan made for the grid `planned` that a callable gave: a launch whose callable gives another
        grid goes to that grid's plan, since this one may rest on facts of `planned` (tle/abi.py)."""
        def checked(grid, args, kwargs):
            g = self._grid(grid, meta)
            if g != planned:
                return self._planned(g, args, kwargs)(g, args, kwargs)
            run(g, args, kwargs)
        checked.fast = None
        return checked

    def _checked_kernel(self, constants: dict):
        """The kernel checked with these constants (once per set of constants)."""
        ckey = tuple(sorted(constants.items()))
        kernel = self._checked.get(ckey)
        if kernel is None:
            kernel = self._checked[ckey] = check_kernel(self.program, self.name, constants)
        return kernel

    def _compile_options(self, options: dict) -> tuple:
        """(num_warps, num_stages, occupancy, asserts) from a launch's options, checked. num_warps None: the
        kernel's default, which the compiler works out (tle.compiler.default_num_warps) and may double where ptxas
        spills a full-precision f32 dot; a binary's key names the default as None, not as its count. num_stages
        None: the kernel's own (tle.compiler.default_num_stages)."""
        num_warps, num_stages = options.get("num_warps"), options.get("num_stages")
        # checked here, not only where a GPU path compiles: a launch on CPU tensors (the interpreter, which has no
        # warps) would otherwise accept what the same launch on the GPU refuses
        if num_warps is not None and (isinstance(num_warps, bool) or not isinstance(num_warps, int)
                                      or num_warps not in NUM_WARPS):
            raise LaunchError(f"{self.name}: num_warps must be a power of two from 1 to 32, got {num_warps!r}")
        if num_stages is not None and (isinstance(num_stages, bool) or not isinstance(num_stages, int)
                                       or num_stages not in NUM_STAGES):
            raise LaunchError(f"{self.name}: num_stages must be an int from 1 to 8, got {num_stages!r}")
        asserts = options.get("asserts", self.asserts)
        if not isinstance(asserts, bool):
            raise LaunchError(f"{self.name}: asserts must be True or False, got {asserts!r}")
        return (int(num_warps) if num_warps is not None else None, int(num_stages) if num_stages is not None else None,
                _occupancy_option(options.get("occupancy"), self.name), asserts)

    # ---- reading the code a launch runs -------------------------------------------------------------------------
    @user_facing
    def ir(self, grid, *args, stage: str = "ttir", arch: str | None = None, sms: int | None = None, **kwargs) -> str:
        """The text of `stage` for the launch kernel[grid](*args, **kwargs) on a GPU, compiled and not launched:
        "tle", "ttir", "ttgir", "llir", "ptx" (native path), "tileir" (Tile IR) or "sass" (either). The same
        specialisation as the launch (sizes, strides, alignment, the grid's facts) and the same options
        (`backend=`, `num_warps=`, ...; the module's backend by default, "auto" routed as on a GPU). The tensors
        may be CPU tensors: then give `arch` (default sm_90) and `sms` (default 132, the H200's) for the GPU meant;
        CUDA tensors name their own. A tuned kernel shows the configuration given, not the tuned one."""
        from ..compiler import STAGES, arch_problem, compile_kernel
        text_stages = [s for s in dict.fromkeys(STAGES["triton"] + STAGES["tileir"] + ("sass",))
                       if s not in ("ast", "tilebc", "cubin")]
        if stage not in text_stages:
            raise LaunchError(f"{self.name}.ir(): stage {stage!r} is not one of {', '.join(text_stages)}")
        problem = arch_problem(arch) if arch is not None else None
        if problem:
            raise LaunchError(f"{self.name}.ir(): arch {arch!r}: {problem}")
        if sms is not None and (isinstance(sms, bool) or not isinstance(sms, int) or sms < 1):
            raise LaunchError(f"{self.name}.ir(): sms is the GPU's count of SMs, a positive int; got {sms!r}")
        values, constants, options = self._bind(args, dict(kwargs))
        kernel = self._checked_kernel(constants)
        flat, device, dims = self._check_args(kernel, values)
        on_gpu = device is not None and device.type == "cuda"
        backend = options.get("backend", self.backend)
        if backend not in ("auto", "triton", "tileir"):
            raise LaunchError(f"{self.name}.ir(): backend must be auto, triton or tileir, not {backend!r}")
        arch = arch or self.arch or (_arch_of(device) if on_gpu else "sm_90")
        sms = sms or (_sm_count(device) if on_gpu else 132)
        meta = {**kernel.constants, **dims}
        planned = self._grid(grid, meta)  # checked as a launch's: the code shown is for a grid that can launch
        _within_cuda_grid(planned)
        spec = self._spec(kernel, flat, planned, sms if backend in ("tileir", "auto") else None)
        num_warps, num_stages, occupancy, asserts = self._compile_options(options)
        owner = [b for b, stages in STAGES.items() if stage in stages and stage not in ("ast", "tle", "cubin", "sass")]
        if owner and backend != "auto" and owner[0] != backend:
            raise LaunchError(f"{self.name}.ir(): stage {stage!r} comes from the {owner[0]} backend; this asks for "
                              f"backend={backend!r} (leave backend out, or give backend={owner[0]!r})")
        compiled = compile_kernel(self.program, self.name, constants, spec, backend=backend, arch=arch, stop=stage,
                                  num_warps=num_warps, num_stages=num_stages, occupancy=occupancy, asserts=asserts)
        text = compiled.stages.get(stage)
        if not isinstance(text, str):  # a safety net: the stage was checked against text_stages above
            raise LaunchError(f"{self.name}.ir(): stage {stage!r} is not text; stages: {', '.join(text_stages)}")
        return text

    def _choose_backend(self, backend: str, on_gpu: bool) -> str:
        """CPU tensors run on the interpreter; on the GPU, "auto" is routed per kernel by the compiler."""
        if backend not in ("auto", "triton", "tileir", "interp"):
            raise LaunchError(f"unknown backend '{backend}'; choose auto, triton, tileir or interp")
        if backend == "auto":
            return "auto" if on_gpu else "interp"
        if backend != "interp" and not on_gpu:
            raise LaunchError(f"{self.name}: backend '{backend}' runs on CUDA tensors, but the tensors are on "
                              "the CPU (use backend='interp' or move them with .cuda())")
        return backend

    @staticmethod
    def _grid(grid, meta):
        if type(grid) is tuple and len(grid) == 3:  # the common case, kept cheap: three ints, none negative
            x, y, z = grid
            if type(x) is int and type(y) is int and type(z) is int and x >= 0 and y >= 0 and z >= 0:
                return grid
        if callable(grid):
            try:
                grid = grid(meta)
            except KeyError as e:  # Triton's meta["BLOCK_SIZE"] spelled for this kernel's names
                raise LaunchError(f"the grid function read meta[{e.args[0]!r}], which this launch does not have; "
                                  f"meta holds the constants and dims: {', '.join(sorted(meta))}") from None
        if isinstance(grid, numbers.Number) or getattr(grid, "ndim", None) == 0:  # one count, as its 1-tuple is
            grid = (grid,)
        try:
            grid = tuple(_whole(g) for g in grid)
        except LaunchError:
            raise
        except TypeError:
            raise LaunchError(f"grid must be 1 to 3 non-negative ints; got {grid!r}") from None
        if not 1 <= len(grid) <= 3 or any(g < 0 for g in grid):
            raise LaunchError(f"grid must be 1 to 3 non-negative ints; got {grid}")
        return grid + (1,) * (3 - len(grid))

    def _entry(self, kernel, constants, spec, backend, device, num_warps, num_stages, occupancy=None,
               asserts=False) -> _Entry:
        arch = self.arch or (_arch_of(device) if backend != "interp" else "cpu")
        asserts = asserts and backend != "interp"  # the interpreter checks every assert anyway
        mkey = (tuple(sorted(kernel.constants.items())), spec, backend, arch, num_warps, num_stages, occupancy,
                asserts, getattr(device, "index", None))
        entry = self._entries.get(mkey)
        if entry is not None:
            return entry
        from ..compiler import compile_kernel
        if backend == "interp":
            compiled = compile_kernel(self.program, self.name, constants, spec, stop="tle")
            compiled.backend = "interp"
            entry = _Entry(compiled, compiled.module)
        else:
            entry = _Entry(*self._gpu_binary(kernel, constants, spec, backend, arch, num_warps, num_stages, device,
                                             occupancy, asserts))
        self._entries[mkey] = entry
        return entry

    def _gpu_binary(self, kernel, constants, spec, backend, arch, num_warps, num_stages, device=None,
                    occupancy=None, asserts=False):
        from ..compiler import Compiled, compile_kernel
        from ..targets.binary import Binary
        from .launch import load
        key = self._binary_key(kernel, spec, backend, arch, num_warps, num_stages, occupancy, asserts)
        data = self._prebuilt.pop(key, None)
        if data is not None:
            cache.put(key, data)
        else:
            data = cache.get(key)
        if data is not None:
            binary = Binary.from_bytes(data)
            compiled = Compiled(kernel, spec, abi(kernel, spec), binary.backend, arch, binary=binary,
                                fallback=binary.extra.get("fallback"))
        else:
            compiled = compile_kernel(self.program, self.name, constants, spec, backend=backend, arch=arch,
                                      num_warps=num_warps, num_stages=num_stages, occupancy=occupancy,
                                      asserts=asserts)
            binary = compiled.binary
            if compiled.fallback:
                binary.extra["fallback"] = compiled.fallback
            cache.put(key, binary.to_bytes())
        if compiled.fallback:
            message = f"tle: kernel '{self.name}' runs on the native CUDA path (Triton): {compiled.fallback}"
            logging.getLogger("tle").info(message)
            if not self.quiet:
                warnings.warn(message, TleFallbackWarning, stacklevel=4)
        if device is None or device.index is None:
            return compiled, load(binary)
        import torch
        with torch.cuda.device(device.index):  # loaded in the context of the tensors' device, not the current one
            return compiled, load(binary, device.index)

    def _binary_key(self, kernel, spec, backend, arch, num_warps, num_stages, occupancy=None, asserts=False) -> str:
        """The disk-cache key of a binary: everything that decides its bytes (an occupancy and asserts only when
        given, so that every other key stays as it was)."""
        extra = (() if occupancy is None else (("occupancy", occupancy),)) + ((("asserts", True),) if asserts else ())
        return cache.key_of(self.fingerprint, self.name, sorted(kernel.constants.items()), spec.key(), backend,
                            arch, num_warps, num_stages, cache.build_id(), _backend_version(backend), *extra)


_PLAIN = (int, float, bool, str, type(None))


def _occupancy_option(value, name: str):
    """The `occupancy` launch option: None (the lowering's choice) or programs per SM, 1 to 32, for the Tile IR
    path's occupancy hint (tileiras caps registers and shapes its code for that many CTAs per SM; the native path
    ignores it, as Tile IR ignores num_warps and num_stages)."""
    if value is None:
        return None
    if type(value) is not int or value not in OCCUPANCIES:
        raise LaunchError(f"{name}: occupancy must be an int from 1 to 32 (programs per SM), got {value!r}")
    return value


class _NullTensor:
    """What an absent tensor parameter (passed as None) stands for in a plan's values: a null, aligned pointer."""

    @staticmethod
    def data_ptr() -> int:
        return 0


_NULL_TENSOR = _NullTensor()


def _signature(args, kwargs):
    """What decides a launch plan: per tensor its dtype, shape, strides, 16-byte alignment and device; per
    scalar its type (and for ints whether it is divisible by 16; the value itself is passed as it comes); and
    keyword arguments (constants, options, parameters by name) by value. None when something is unhashable."""
    key, tensors = [], []
    for v in args:
        t = type(v)
        if t is int:
            key.append((int, v % 16 == 0))
        elif t in _PLAIN:  # tested before hasattr, which is slow when it fails
            key.append(t)
        elif hasattr(v, "data_ptr"):
            try:
                key.append((v.dtype, v.shape, v.stride(), v.data_ptr() % 16 == 0, v.device))
            except RuntimeError:  # a sparse tensor has no strides or storage: the plan's checks say so
                return None
            tensors.append(v)
        elif isinstance(v, numbers.Integral):  # numpy's ints: divisibility by 16 is specialised on, as for ints
            key.append((t, int(v) % 16 == 0))
        else:
            key.append(t)
    for k, v in kwargs.items():
        if type(v) not in _PLAIN and hasattr(v, "data_ptr"):
            key.append((k, v.dtype, v.shape, v.stride(), v.data_ptr() % 16 == 0, v.device))
            tensors.append(v)
        else:  # by type too: num_warps=4.0 == 4 and True == 1, but only one of each is a valid value
            key.append((k, type(v), v))
    if len(tensors) > 1 and (overlap := _overlapping(tensors)):  # an in-place launch: its own binary (abi.aliases)
        key.append(overlap)
    key = tuple(key)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _overlapping(tensors: list) -> tuple:
    """The pairs (i, j) of tensors whose address ranges overlap, as tle/abi.py's aliases() finds them: part of a
    plan's signature, since a Tile IR binary for separate tensors does not order accesses between them."""
    spans = []
    for i, t in enumerate(tensors):
        try:
            if t.data_ptr() and t.numel():
                spans.append((*byte_span(t), i))
        except (RuntimeError, AttributeError, TypeError):  # no storage: the plan's checks say what it is
            continue
    spans.sort()
    return tuple((i, j) for k, (_, stop, i) in enumerate(spans) for start, _, j in spans[k + 1:] if start < stop)


def _within_cuda_grid(grid) -> None:
    """CUDA's limits on a grid (x up to 2^31 - 1, y and z up to 65535), said before cuLaunchKernel refuses it with
    CUDA_ERROR_INVALID_VALUE."""
    for axis, n, limit in zip("xyz", grid, (2 ** 31 - 1, 65535, 65535)):
        if n > limit:
            raise LaunchError(f"grid {tuple(grid)}: {n} programs along {axis}, more than CUDA launches ({limit}); "
                              + ("put the most programs on x, or " if axis != "x" else "") +
                              "let each program loop over several tiles")


def _numpy_scalar(v) -> bool:
    """A numpy scalar (np.float32(0.5), np.int64(3), np.bool_(True)) or 0-dim array, without importing numpy."""
    return type(v).__module__ == "numpy" and getattr(v, "shape", None) == ()


def _arch_of(device) -> str:
    import torch
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def _sm_count(device) -> int:
    """The device's SM count (132 on the H200); torch keeps the device's properties, so asking again is cheap."""
    import torch
    return torch.cuda.get_device_properties(device).multi_processor_count


def _backend_version(backend: str) -> str:
    if backend in ("triton", "auto"):
        from ..targets.triton import triton_version
        version = triton_version()
        if backend == "triton":
            return version
    from ..targets.tileir import tileiras_version
    try:
        tileiras = tileiras_version()
    except Exception:  # noqa: BLE001 - no tileiras: auto routes to Triton, and the key must still differ
        tileiras = "none"
    return f"{version};{tileiras}" if backend == "auto" else tileiras


def program_fingerprint(program: Program) -> str:
    """A hash of the kernel file's path and the texts of it and every file it imports."""
    return cache.key_of(program.file, program_texts(program))


def program_texts(program: Program) -> list[str]:
    """The texts of the kernel file and of every file it imports, in the order of their paths."""
    files = {d.span.file for table in (program.kernels, program.fns, program.consts) for d in table.values()}
    files.add(program.file)
    texts = []
    for f in sorted(files):
        if f == program.file:
            texts.append(program.source)
        elif os.path.exists(f):
            with open(f, encoding="utf-8") as fh:
                texts.append(fh.read())
    return texts

