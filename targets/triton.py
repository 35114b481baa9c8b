"""The Triton target: TTIR text -> cubin, through triton.compile (pinned: triton 3.6.0).

Input is the TTIR that lowering/tle_to_ttir.py prints: generic MLIR form with `loc("file.tle":L:C)` locations.
Triton runs its whole pipeline on it (TTIR passes, TTIR -> TTGIR, TTGIR -> LLVM IR, PTX, ptxas) and we keep every
stage in the returned Binary.

Why the text goes in through an ASTSource subclass and not as a `.ttir` file: for a file, triton.compile skips
the passes of the file's own stage (inliner, rewrite_tensor_pointer, combine, loop_unroll), so block pointers
(`tt.make_tensor_ptr`, `tt.advance`) fail later in the pipeline. An ASTSource starts *before* the TTIR stage.

Errors: Triton reports MLIR diagnostics on fd 2 (C++), raises bare RuntimeErrors ("Parse MLIR file failed.",
"PassManager::run failed") and PTXASError for ptxas. We capture fd 2 while compiling and turn the first error into
a TleError at the tle source location it names (for ptxas: the PTX line's `.loc`), with Triton's own words as notes.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import sys
import tempfile
import traceback
from dataclasses import dataclass

from tle.diagnostics import Span, TleError, register_source, span_of_location_text
from tle.targets.binary import Binary, kernel_attributes

TRITON_VERSION = "3.6.0"  # the version these private interfaces were checked against

# Triton 3.6 appends two pointer parameters to every kernel, after the explicit ones: global scratch and profile
# scratch. Each needs `size` bytes per program (0: pass a null pointer). Their sizes come from the metadata.
_IMPLICIT_SCRATCH = ("global_scratch", "profile_scratch")


def triton_version() -> str:
    import triton
    return triton.__version__


def capability(arch: str) -> int:
    """The compute capability of an arch name as one number: sm_90 and sm_90a -> 90."""
    m = re.fullmatch(r"sm_?(\d+)a?", arch)
    if not m:
        raise ValueError(f"arch must look like 'sm_90', got {arch!r}")
    return int(m.group(1))


def _param_type(triton_type: str) -> str:
    """Triton's signature spelling ('*f32', 'i32', 'fp32' in some versions) -> Binary.params spelling."""
    if triton_type.startswith("*"):
        return "ptr"
    return {"fp16": "f16", "fp32": "f32", "fp64": "f64"}.get(triton_type, triton_type)


# ---- capturing Triton's diagnostics ---------------------------------------------------------------------------

@contextlib.contextmanager
def _captured_output():
    """Redirect fd 2 (where MLIR and LLVM print) and Python's stdout (where Triton prints a failing PTX) into a
    buffer. Not thread-safe: fd 2 belongs to the whole process."""
    log = io.StringIO()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            with contextlib.redirect_stdout(log):
                yield log
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            log.write(tmp.read().decode("utf-8", errors="replace"))


# A diagnostic line as MLIR prints it: `loc("f":L:C): error: msg` when the file is not in its source manager,
# `f:L:C: error: msg` when it is.
_DIAG = re.compile(r'^(?P<loc>loc\(.*?\)|[^\s:][^:\n]*:\d+:\d+): (?P<sev>error|warning|note|remark): (?P<msg>.*)$')
# What MLIR adds around any pass failure; says nothing about the kernel.
_PIPELINE_NOISE = ("Failures have been detected while processing an MLIR pass pipeline",
                   "Pipeline failed while executing")
# ptxas: "ptxas /tmp/x.ptx, line 52; error   : Unknown symbol 'bogus'" or "ptxas fatal   : Unresolved extern ..."
_PTXAS = re.compile(r"^ptxas (?:[^,\n]*, line (\d+); )?(?:error|fatal)\s*:\s*(.*?)\s*$", re.MULTILINE)


def _loc_aliases(ttir: str) -> dict[str, str]:
    """`#loc12 = loc(...)` lines -> {"#loc12": "loc(...)"}, so a TTIR line that says loc(#loc12) can be mapped."""
    return dict(re.findall(r"^(#loc\d*) = (loc\(.*\))\s*$", ttir, re.MULTILINE))


def _tle_span_of_ttir_line(ttir: str, line: int) -> Span | None:
    """The tle location written on line `line` of the TTIR text (following #loc aliases)."""
    lines = ttir.splitlines()
    if not 0 < line <= len(lines):
        return None
    text, aliases = lines[line - 1], _loc_aliases(ttir)
    for _ in range(8):  # aliases can nest: #loc19 = loc("pid"(#loc2))
        span = span_of_location_text(text)
        if span is not None:
            return span
        refs = re.findall(r"#loc\d*\b", text)
        if not refs:
            return None
        text = " ".join(aliases.get(r, "") for r in refs)
    return None


def _span_of_ptx_line(ptx: str, line: int) -> Span | None:
    """The source location of PTX line `line`: the last `.loc` before it, through the `.file` table."""
    files = {int(n): path for n, path in re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', ptx, re.MULTILINE)}
    for text in reversed(ptx.splitlines()[:line]):
        m = re.match(r"\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)", text)
        if m and int(m.group(2)) > 0:
            return Span(files.get(int(m.group(1)), "<ptx>"), int(m.group(2)), int(m.group(3)))
    return None


class _TtirFile:
    """The TTIR text in a temporary file (Triton's parser reads files), named so diagnostics can be traced back."""

    def __init__(self, ttir: str, name: str):
        self.text, self.name = ttir, name
        self._dir = tempfile.TemporaryDirectory(prefix="tle-ttir-")
        self.path = os.path.join(self._dir.name, name)
        with open(self.path, "w") as f:
            f.write(ttir)

    def close(self) -> None:
        self._dir.cleanup()

    def span(self, loc_text: str) -> tuple[Span | None, str | None]:
        """The tle span of a diagnostic location, and "name:L:C" when the diagnostic points into the TTIR text."""
        if loc_text.startswith("loc("):
            span = span_of_location_text(loc_text)
        else:
            m = re.fullmatch(r"(.*):(\d+):(\d+)", loc_text)
            span = Span(m.group(1), int(m.group(2)), int(m.group(3))) if m else None
        if span is None or span.file != self.path:
            return span, None
        # A parse error in the TTIR text: point at the tle location written on that line, else at the TTIR itself.
        in_ttir = f"{self.name}:{span.line}:{span.col}"
        tle_span = _tle_span_of_ttir_line(self.text, span.line)
        if tle_span is None:
            register_source(self.name, self.text)  # so render() can show the offending TTIR line
            return Span(self.name, span.line, span.col), None
        return tle_span, in_ttir


def _ptxas_error(exc: BaseException, ptx: str | None) -> TleError:
    found = _PTXAS.findall(str(exc))
    if not found:
        return TleError(None, f"ptxas failed: {str(exc).strip()}")
    line, message = found[0]
    span = _span_of_ptx_line(ptx, int(line)) if line and ptx else None
    others = list(dict.fromkeys(msg for _, msg in found[1:] if msg != message))
    notes = [f"ptxas: {msg}" for msg in others[:5]] + ([f"({len(others) - 5} more)"] if len(others) > 5 else [])
    return TleError(span, f"ptxas rejected the kernel: {message}", notes)


def _backend_error(exc: BaseException, log: str, source: _TtirFile, ptx: str | None = None,
                   stage: str | None = None) -> TleError:
    """Turn a Triton failure and what it printed on fd 2 into one TleError at the tle location it names."""
    if type(exc).__name__ == "PTXASError":
        return _ptxas_error(exc, ptx)
    # The failing step of Triton's pipeline: make_ttir, make_ttgir, make_llir, make_ptx or make_cubin.
    stage = stage or next((f.name for f in reversed(traceback.extract_tb(exc.__traceback__))
                           if f.name.startswith("make_")), None)
    what = "Triton rejected the TTIR" if stage == "parse" else f"Triton failed in {stage}" if stage else "Triton failed"
    diags = [m.groupdict() for m in map(_DIAG.match, log.splitlines()) if m]
    real = [d for d in diags if not d["msg"].startswith(_PIPELINE_NOISE)]
    # Crashes inside a pass (report_fatal_error, assert) are caught by MLIR's crash recovery; they print no location.
    crashes = [line.strip() for line in log.splitlines() if line.startswith("LLVM ERROR:") or "Assertion" in line]
    first = next((d for d in real if d["sev"] == "error"), None)
    notes = []
    if first is not None:
        span, in_ttir = source.span(first["loc"])
        message = first["msg"]
        notes += [f"{d['sev']}: {d['msg']}" for d in real if d is not first]
        notes += [f"at {in_ttir} in the TTIR"] if in_ttir else []
        notes += crashes
    else:
        # Only MLIR's summary names a location (the failing pass's anchor, usually the module), if anything.
        span = source.span(diags[0]["loc"])[0] if diags else None
        message = crashes[0] if crashes else (str(exc).strip() or type(exc).__name__)
        notes += crashes[1:]
    notes.append(f"triton {triton_version()}: {type(exc).__name__}: {str(exc).strip()}")
    return TleError(span, f"{what}: {message}", notes)


# ---- parsing and verifying TTIR -------------------------------------------------------------------------------

def _new_context():
    from triton._C.libtriton import ir, nvidia
    context = ir.context()
    ir.load_dialects(context)
    nvidia.load_dialects(context)
    return context


def _parse(source: _TtirFile, context):
    """Parse and verify; MLIR prints the diagnostic on fd 2 and raises RuntimeError('Parse MLIR file failed.')."""
    from triton._C.libtriton import ir
    with _captured_output() as log:
        try:
            return ir.parse_mlir_module(source.path, context)
        except RuntimeError as exc:
            failure = exc
    raise _backend_error(failure, log.getvalue(), source, stage="parse") from RuntimeError(log.getvalue())


_GENERIC_FUNC = re.compile(r'function_type = \(([^\n()]*)\) -> \(\), sym_name = "([A-Za-z_][\w$.]*)"')
_SCALAR_TYPES = {"i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"}


def _generic_entry(ttir: str):
    """(name, Binary.params) of the only tt.func of generic-form TTIR, as tle prints it; None for anything else
    (pretty form, several functions, a type this reader does not know): the caller parses the text then."""
    funcs = _GENERIC_FUNC.findall(ttir)
    if len(funcs) != 1 or ttir.count('"tt.func"()') != 1:
        return None
    types, name = funcs[0]
    params = []
    for t in (t.strip() for t in types.split(",")) if types.strip() else ():
        if re.fullmatch(r"!tt\.ptr<[a-z0-9]+(, \d+)?>", t):
            params.append("ptr")
        elif t in _SCALAR_TYPES:
            params.append(t)
        else:
            return None
    return name, params


def _source_name(ttir: str, filename_hint: str | None) -> str:
    if filename_hint:
        return os.path.basename(filename_hint) + ("" if filename_hint.endswith(".ttir") else ".ttir")
    m = re.search(r'sym_name = "([A-Za-z_][\w$.]*)"', ttir) or re.search(r"tt\.func\s+(?:public\s+)?@(\w+)", ttir)
    return (m.group(1) if m else "kernel") + ".ttir"


def verify_ttir(ttir: str, filename_hint: str | None = None) -> None:
    """Parse and verify TTIR with Triton's own dialects; raise TleError (at the tle location) if it is malformed."""
    source = _TtirFile(ttir, _source_name(ttir, filename_hint))
    try:
        _parse(source, _new_context())
    finally:
        source.close()


# ---- compiling --------------------------------------------------------------------------------------------------

def _ttir_source_class():
    """An ASTSource whose make_ir parses TTIR text instead of generating it from a Python function.

    triton.compile treats any ASTSource as starting before the "ttir" stage, so the TTIR passes run. It reads from
    its source only: name (file names in Triton's cache), hash() (cache key), parse_options(), language, ext, and
    make_ir(). Private interface of triton 3.6; tests/targets/test_triton_target.py checks it still works.
    """
    from triton.backends.compiler import Language
    from triton.compiler import ASTSource

    class TtirTextSource(ASTSource):
        def __init__(self, source: _TtirFile, name: str):  # no super().__init__: there is no Python function
            self.source, self.name = source, name
            self.language, self.ext = Language.TRITON, "ttir"
            self.signature, self.constants, self.attrs = {}, {}, {}

        def hash(self):
            return hashlib.sha256(self.source.text.encode("utf-8")).hexdigest()

        def make_ir(self, target, options, codegen_fns, module_map, context):
            module = _parse(self.source, context)
            module.context = context
            return module

        def parse_options(self):
            return {}

    return TtirTextSource


def compile_ttir(ttir: str, arch: str = "sm_90", *, num_warps: int = 4, num_stages: int = 3, num_ctas: int = 1,
                 filename_hint: str | None = None) -> Binary:
    """Compile TTIR text (generic or pretty form) to a cubin for `arch` ("sm_80", "sm_90", "sm_100", ...).

    filename_hint names the TTIR text in errors that point into the TTIR itself (when the failing line carries no
    tle location); the default is "<kernel>.ttir". Raises TleError when Triton or ptxas rejects the kernel.
    """
    import triton
    from triton.backends.compiler import GPUTarget

    cc = capability(arch)
    source = _TtirFile(ttir, _source_name(ttir, filename_hint))
    try:
        # The entry's name and parameter types are needed before Triton parses the text. tle's generic TTIR states
        # them in one line (read here: a Triton context and a second parse cost milliseconds of every cold compile);
        # other text is parsed up front, which also makes malformed TTIR fail cleanly here.
        entry = _generic_entry(ttir)
        if entry is None:
            context = _new_context()  # kept in a variable: the module does not keep its context alive
            module = _parse(source, context)
            name = module.get_entry_func_name()
            entry = name, [_param_type(t) for t in module.get_function_signature(module.get_function(name))]
        name, params = entry
        src = _ttir_source_class()(source, name)
        options = {"num_warps": num_warps, "num_stages": num_stages, "num_ctas": num_ctas}
        failure = None
        with _captured_output() as log:
            try:
                kernel = triton.compile(src, target=GPUTarget("cuda", cc, 32), options=options)
            except Exception as exc:  # noqa: BLE001 - every backend failure becomes a TleError below
                failure = exc
        if failure is not None:
            if isinstance(failure, TleError):
                raise failure
            ptx = re.search(r"^//\s*\n//\s*Generated by LLVM NVPTX Back-End.*", log.getvalue(), re.S | re.M)
            raise _backend_error(failure, log.getvalue(), source, ptx.group(0) if ptx else None) from failure
        if log.getvalue():
            sys.stderr.write(log.getvalue())  # warnings and remarks: pass on, never swallow
    finally:
        source.close()
    return _binary(kernel, arch, params)


# ---- what ptxas says about a kernel (tlec -v) -------------------------------------------------------------------

@dataclass
class PtxasReport:
    """ptxas -v on a kernel's PTX: registers per thread, bytes spilled to local memory, and its "Potential
    Performance Loss" remarks in its own words (wgmma instructions serialised, and why)."""
    registers: int
    spill_stores: int
    spill_loads: int
    losses: list[str]


def ptxas_report(ptx: str) -> PtxasReport:
    """Run Triton's ptxas with -v on `ptx` (for the arch its `.target` names) and read what it reports. Triton runs
    ptxas with -v too but drops the log; this runs it again, so it is for tlec -v, not for every launch."""
    import subprocess
    from triton.backends.nvidia.compiler import get_ptxas
    target = re.search(r"^\.target\s+(sm_\w+)", ptx, re.MULTILINE)
    gpu = target.group(1) if target else "sm_90a"
    # the ptxas Triton itself ran for this arch (a Blackwell one from sm_100 on: the other rejects its PTX version)
    tool = get_ptxas(int(re.match(r"sm_(\d+)", gpu).group(1))).path
    with tempfile.TemporaryDirectory(prefix="tle-ptxas-") as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        out = subprocess.run([tool, "-v", f"--gpu-name={gpu}", src, "-o", os.path.join(tmp, "kernel.cubin")],
                             capture_output=True, text=True)
    log = out.stderr + out.stdout
    if out.returncode != 0:
        raise RuntimeError(f"ptxas failed (exit {out.returncode}): {log.strip()[:2000]}")
    regs = re.search(r"Used (\d+) registers", log)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    losses = [re.sub(r" in the function '[^']*'$", "", m.strip())
              for m in re.findall(r"Potential Performance Loss:\s*(.*)", log)]
    return PtxasReport(int(regs.group(1)) if regs else 0, int(spills.group(1)) if spills else 0,
                       int(spills.group(2)) if spills else 0, losses)


def _binary(kernel, arch: str, params: list[str]) -> Binary:
    md = kernel.metadata
    ptx = kernel.asm["ptx"]
    entry = re.search(rf"\.entry\s+{re.escape(md.name)}\s*\(([^)]*)\)", ptx)
    n_ptx_params = len(re.findall(r"\.param\s", entry.group(1))) if entry else -1
    if n_ptx_params != len(params) + len(_IMPLICIT_SCRATCH):
        # The launcher appends the scratch pointers blindly; refuse a cubin whose ABI we do not understand.
        raise RuntimeError(f"kernel {md.name}: PTX entry has {n_ptx_params} parameters, expected "
                           f"{len(params)} explicit + {len(_IMPLICIT_SCRATCH)} scratch (triton {triton_version()})")
    scratch = [
        {"name": "global_scratch", "size": md.global_scratch_size or 0, "align": md.global_scratch_align or 1},
        {"name": "profile_scratch", "size": md.profile_scratch_size or 0, "align": md.profile_scratch_align or 1},
    ]
    attrs = kernel_attributes(kernel.asm["cubin"], md.name)
    return Binary(
        backend="triton",
        arch=arch,
        name=md.name,
        cubin=kernel.asm["cubin"],
        params=params,
        num_threads=md.num_warps * md.warp_size,  # num_warps after warp specialization (ttg.total-num-warps)
        shared_mem=md.shared or 0,
        stages={k: v for k, v in kernel.asm.items() if k in ("source", "ttir", "ttgir", "llir", "ptx")},
        extra={
            "triton_version": md.triton_version,
            "num_warps": md.num_warps,
            "num_stages": md.num_stages,
            # Triton launches num_ctas CTAs per program as one cluster: grid x is multiplied by num_ctas.
            "num_ctas": md.num_ctas,
            "scratch": scratch,  # one trailing pointer parameter each, `size` bytes per CTA
            "launch_cooperative_grid": bool(md.launch_cooperative_grid),
            "launch_pdl": bool(md.launch_pdl),
            # what ptxas gave the kernel, read from the cubin as for Tile IR's: the compiler's spill retry reads these
            "registers": attrs.registers,
            "stack_bytes": attrs.stack,
        },
    )
