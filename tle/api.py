"""The Python API: turn .tle source into callable kernels.

    import tle
    mod = tle.compile("examples/softmax.tle")        # a path, or the source text itself
    mod.softmax[(M,)](x, y, BLOCK=1024)               # CUDA tensors: GPU; CPU tensors: the interpreter

`backend` chooses where kernels run: "auto" (CPU tensors on the interpreter; CUDA tensors on the CUDA Tile IR
path when the kernel, the GPU and this machine allow it, else on the native CUDA path, Triton), "tileir",
"triton" or "interp". It can also be given per launch: mod.softmax[grid](x, y, backend="interp").
When "auto" falls back from Tile IR it logs why on the "tle" logger (INFO); with quiet=False it also issues a
TleFallbackWarning naming the kernel and the reason.
"""
from __future__ import annotations

import os

from .check import check_kernel, load_program, warn_uncalled_fns
from .diagnostics import Note, TleError, user_facing
from .runtime.kernel import Kernel, program_fingerprint


class Module:
    """The kernels of one .tle file, as attributes: mod.softmax, mod.matmul, ..."""

    def __init__(self, program, backend: str, quiet: bool, arch: str | None, asserts: bool = False):
        self.program = program
        fp = program_fingerprint(program)
        self.kernels = {name: Kernel(program, name, fp, backend, quiet, arch, asserts) for name in program.kernels}
        for name, kernel in self.kernels.items():  # plain attributes: mod.k costs no __getattr__ call per launch
            if name not in ("kernels", "program"):
                self.__dict__[name] = kernel

    def __getattr__(self, name):
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"{self.program.file} has no kernel '{name}' (kernels: {', '.join(kernels)})")

    def __dir__(self):
        return list(self.kernels) + ["kernels", "program"]

    def __repr__(self) -> str:
        return f"<tle module {self.program.file}: {', '.join(self.kernels)}>"


@user_facing
def compile(source: str, *, backend: str = "auto", quiet: bool = True, arch: str | None = None,
            filename: str | None = None, tune: dict | None = None,
            asserts: bool = False) -> Module:  # noqa: A001 - as re.compile
    """Parse and check a .tle file (or source text): each kernel whose constants all have defaults is checked under
    them now (the others at their first launch); kernels compile lazily, per specialisation, on launch.
    `tune` maps kernel names to tuning spaces (a tle.tuning.TuneSpace or a dict of params; docs/tuning.md).
    `asserts=True` compiles the kernels' assert()s into their GPU code (the interpreter always checks them); a
    launch may also give asserts=True or False itself."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise TypeError(f"tle.compile takes a path to a .tle file or the source text, got {type(source).__name__}"
                        + (" (decode bytes first: source.decode())" if isinstance(source, bytes) else ""))
    if backend not in ("auto", "triton", "tileir", "interp"):
        raise ValueError(f"tle.compile: backend must be auto, triton, tileir or interp, not {backend!r}")
    if arch is not None:
        from .compiler import arch_problem
        problem = arch_problem(arch)
        if problem:
            raise ValueError(f"tle.compile: arch {arch!r}: {problem}")
    if _a_path(source):  # a path is read whether or not filename= names it; filename= then names it in messages
        if not os.path.exists(source):
            raise FileNotFoundError(f"tle.compile: no file {source!r} (it takes a path to a .tle file, or source "
                                    "text)")
        filename = filename or source
        with open(source, encoding="utf-8") as f:
            source = f.read()
    if not isinstance(asserts, bool):
        raise TypeError(f"tle.compile: asserts must be True or False, got {asserts!r}")
    program = load_program(source, filename or "<string>")
    warn_uncalled_fns(program)
    for name, kernel in program.kernels.items():  # the body's mistakes now; the result is kept for the launch
        if all(c.default is not None for c in kernel.const_params):
            try:
                check_kernel(program, name)
            except TleError as e:
                if kernel.const_params:  # the defaults may not be what any launch uses (a porter's report)
                    shown = ", ".join(f"{c.name} = {_default_text(c)}" for c in kernel.const_params)
                    e.notes.append(Note(f"tle.compile checks kernel '{name}' under its defaults ({shown}); a launch "
                                        f"checks it under its own constants, so defaults that suit the body let "
                                        f"the file compile", kernel.name_span or kernel.span))
                raise
    module = Module(program, backend, quiet, arch, asserts)
    for name, space in (tune or {}).items():
        getattr(module, name).tune_space = space
    return module


def _a_path(source: str) -> bool:
    """Is tle.compile's text a path? One that ends in ".tle" (no program does), or one line without spaces that
    holds a '/' or a '.' and is no comment (a program needs `kernel NAME`): a mistyped path ("adamw.tl") is then
    missing, not a syntax error at its first '/'."""
    if "\n" in source:
        return False
    if source.endswith(".tle"):
        return True
    text = source.strip()
    return bool(text) and not any(ch.isspace() for ch in text) and ("/" in text or "." in text) and \
        not text.startswith(("//", "/*"))


def _default_text(c) -> str:
    """A constant parameter's default as written (an element type's name, a number, true/false)."""
    d = c.default
    for attr in ("id", "value", "name"):
        if hasattr(d, attr):
            v = getattr(d, attr)
            return str(v).lower() if isinstance(v, bool) else str(v)
    return "..."

