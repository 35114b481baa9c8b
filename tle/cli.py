"""tlec: the tle command-line compiler.

    tlec FILE [--kernel NAME] [-D NAME=VALUE ...] [--emit=STAGE] [--arch sm_90] [--sizes M=..] [--grid X] [--sms N]
              [-o OUT]
    tlec tune FILE --kernel NAME --shape M=4096,N=4096,K=4096 --dtype f16 -P BM=64,128 --grid 'cdiv(M,BM),cdiv(N,BN)'
              [--budget-s 120] [--export F] [--import F]        (autotuning: runtime/tuning.py, docs/tuning.md)

Runs the pipeline of tle/compiler.py and stops after --emit's stage, for each kernel (one kernel's error does not
stop the others). Exit codes: 0 ok, 1 an error in the program (printed as file:line:col: error: ...), 2 a bad
command line, 3 an internal error (a bug in tle, or tileiras failing without naming a line of the program).
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings

from . import debug
from .diagnostics import TleError, TlePaddingWarning, TleWarning, render

EMITS = ("ast", "tle", "ttir", "ttgir", "llir", "ptx", "tileir", "tilebc", "cubin", "sass")
BINARY_EMITS = ("cubin", "tilebc")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tlec",
        description="Compile a .tle file: parse, check, lower to the tle dialect, then to CUDA Tile IR or Triton TTIR, "
                    "and build a cubin. "
                    "Each --emit value stops after that stage and prints (or writes) its output. "
                    "'tlec tune FILE ...' tunes a kernel instead (tlec tune --help; docs/tuning.md).",
        epilog="exit codes: 0 ok; 1 an error in the program; 2 a bad command line; 3 an internal error (in tle, "
               "or tileiras failing without naming a line).\n"
               "examples:\n"
               "  tlec examples/softmax.tle --emit=ttir\n"
               "  tlec examples/matmul.tle --kernel matmul -D BM=128 --emit=cubin --arch sm_90 -o mm.cubin\n"
               "  tlec examples/softmax.tle --emit=tileir\n"
               "  tlec examples/softmax.tle --emit=cubin --backend=tileir -o softmax.cubin\n"
               "  tlec examples/layernorm.tle --emit=ttir --sizes M=4096,N=1024 --grid 4096   (no row check)\n"
               "  tlec examples/matmul.tle --emit=tileir --sizes M=4096,N=4096,K=128 --grid 32,32 --sms 132\n"
               "      (the persistent loop a launch of 1024 programs with a short K gets on an H200)\n"
               "environment: TLE_DEBUG=1..4 (stage times, IR after each stage, tracebacks).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="the .tle source file ('-' reads standard input)")
    p.add_argument("--kernel", "-k", metavar="NAME", action="append",
                   help="compile only this kernel (default: every kernel); give it again for several")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="set a compile-time constant: an int, a float, true/false or an element type (f16, ...)")
    p.add_argument("--emit", choices=EMITS, default="cubin",
                   help="the stage to stop after (default: cubin). ast: the syntax tree; tle: the tle MLIR "
                        "dialect; ttir: Triton IR; ttgir, llir, ptx: Triton's later stages (native CUDA path); "
                        "tileir: CUDA Tile IR; tilebc: its bytecode (Tile IR path); cubin: the binary; sass: its "
                        "machine code, under the .tle lines it came from")
    p.add_argument("--backend", choices=("auto", "triton", "tileir"), default="auto",
                   help="auto (default): CUDA Tile IR when the kernel, the arch and this machine allow it, else "
                        "the native CUDA path (Triton), saying why with -v; triton or tileir force one (a forced "
                        "tileir on a kernel it cannot take is an error that says why)")
    p.add_argument("--arch", default="sm_90", help="GPU architecture, e.g. sm_80, sm_90 (default: sm_90)")
    p.add_argument("--num-warps", type=int, default=None,
                   help="warps per program on the Triton path (default: 8 for a kernel whose dots hold 128x256 or "
                        "more elements at once, else 4; without a dot, 4 to 32 by its largest tile and what it does "
                        "with it (docs/language.md); -v says which)")
    p.add_argument("--num-stages", type=int, default=None,
                   help="Triton's kernel-wide software-pipelining depth, for loops without pipeline(...) (default: "
                        "the pipeline(stages=N) of the kernel's loops that hold a dot, where they agree, else 3)")
    p.add_argument("--occupancy", type=_occupancy, default=None, metavar="N",
                   help="programs per SM for the Tile IR path's occupancy hint, 1 to 32 (tileiras caps registers "
                        "and shapes its code for N CTAs per SM; default: the lowering's choice, docs/tileir.md)")
    p.add_argument("--asserts", action="store_true",
                   help="compile the kernels' assert()s into the GPU code (default: only the interpreter checks "
                        "them, as Triton keeps tl.device_assert only in its debug mode)")
    p.add_argument("--generic", action="store_true",
                   help="assume nothing about the arguments (default: 16-byte aligned base pointers and "
                        "contiguous rows, as torch tensors usually are)")
    p.add_argument("--sizes", metavar="DIM=N,...",
                   help="compile as a launch with these sizes of the kernel's symbolic dims would: each size and "
                        "each contiguous stride is marked with the power of two (up to 16) that divides it, as the "
                        "runtime does for real tensors; tiles at constant indices or at a loop's index that the "
                        "sizes keep inside lose their bounds checks, a loop whose last tiles only are ragged runs "
                        "as two (the first unchecked), and loops the sizes make run are marked so")
    p.add_argument("--grid", metavar="X[,Y[,Z]]",
                   help="with --sizes, compile as a launch on this grid would: tiles indexed by program_id that "
                        "the grid keeps inside their tensor lose their bounds checks (docs/language.md)")
    p.add_argument("--sms", type=int, default=None, metavar="N",
                   help="with --grid, the GPU's SM count (132 on the H100 SXM and H200): the facts about the grid's "
                        "size then hold as they would at run time, so the Tile IR path shows the occupancy hint or "
                        "the persistent loop that launch gets, and --backend=auto the path it takes "
                        "(docs/tileir.md, \"Performance\")")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="write the output here (default: text to standard output; a binary stage to KERNEL.cubin or "
                        "KERNEL.tilebc); a binary stage of several kernels goes to OUT's stem.KERNEL.cubin each")
    p.add_argument("-v", "--verbose", action="store_true", help="say which stages ran and where output went")
    return p


def parse_define(text: str, parser: argparse.ArgumentParser):
    if "=" not in text:
        parser.error(f"-D {text}: expected NAME=VALUE")
    name, value = text.split("=", 1)
    if not name.isidentifier():
        parser.error(f"-D {text}: '{name}' is not a name")
    parsed = _scalar(value)
    if not isinstance(parsed, str) or value.replace("_", "").isalnum():
        return name, parsed  # a string is an element type such as f16; the checker validates it
    parser.error(f"-D {text}: '{value}' is not a number, a boolean or a type name")


def main(argv: list[str] | None = None) -> int:
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _main(argv)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """tle's own warnings as its errors are printed: the rendered message alone (it names the file and line, and
    shows the source line under a caret); other warnings as Python prints them."""
    if issubclass(category, (TleWarning, TlePaddingWarning)):
        print(message, file=file or sys.stderr)
    else:
        _SHOW_WARNING(message, category, filename, lineno, file, line)


_SHOW_WARNING = warnings.showwarning


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["tune"]:  # a subcommand word before the file (a file named "tune": write ./tune)
        return tune_main(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    constants = dict(parse_define(d, parser) for d in args.defines)
    args.sizes, args.grid = _parse_launch(args.sizes, args.grid, args.generic, parser)
    if args.sms is not None and (args.grid is None or args.sms < 1):
        parser.error("--sms needs --grid and a positive count: it says how many waves the grid's programs make")
    from .compiler import arch_problem
    problem = arch_problem(args.arch)
    if problem:
        parser.error(f"--arch {args.arch}: {problem}")
    from .runtime.kernel import NUM_STAGES, NUM_WARPS
    if args.num_warps is not None and args.num_warps not in NUM_WARPS:
        parser.error(f"--num-warps {args.num_warps}: a power of two from 1 to 32 (at most 1024 threads a program)")
    if args.num_stages is not None and args.num_stages not in NUM_STAGES:
        parser.error(f"--num-stages {args.num_stages}: from 1 to 8")
    if args.output and not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        parser.error(f"-o {args.output}: the folder {os.path.dirname(os.path.abspath(args.output))} does not exist")
    if args.output and os.path.isdir(args.output):
        parser.error(f"-o {args.output}: is a folder; give a file name")
    try:
        if args.file == "-":
            text, filename = sys.stdin.read(), "<stdin>"
        else:
            try:
                with open(args.file, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                parser.error(f"cannot read {args.file}: {e.strerror}")
            filename = args.file
        return _run(args, text, filename, constants)
    except TleError as e:
        print(str(e), file=sys.stderr)
        if debug.level() >= 4:
            traceback.print_exc()
        return 3 if _tool_failure(e) else 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - a bug in tle, not in the user's program
        print(f"tlec: internal compiler error: {type(e).__name__}: {e}", file=sys.stderr)
        if debug.level() >= 4:
            traceback.print_exc()
        else:
            print("  (set TLE_DEBUG=4 for a traceback; please report it)", file=sys.stderr)
        return 3


def _occupancy(text: str) -> int:
    """--occupancy: an int from 1 to 32."""
    from .check import OCCUPANCIES
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n not in OCCUPANCIES:
        raise argparse.ArgumentTypeError(f"expected programs per SM from 1 to 32, got {text!r}")
    return n


def _run(args, text: str, filename: str, constants: dict) -> int:
    from .check import load_program
    from .parser import parse
    from .ast import dump
    if args.emit == "ast":
        _write(args, dump(parse(text, filename)) + "\n")
        return 0
    program = load_program(text, filename)
    from .check import warn_uncalled_fns
    warn_uncalled_fns(program)
    names = list(dict.fromkeys(args.kernel)) if args.kernel else program.kernel_names()  # each once, in order
    if not names:
        raise TleError(None, f"{filename} declares no kernel")
    for name in names:
        if name not in program.kernels:  # a mistake on the command line: exit 2
            from .check import check_kernel
            try:
                check_kernel(program, name)  # the "no kernel named" error, with suggestions
            except TleError as e:
                print(render(e), file=sys.stderr)
                return 2
    from .abi import WideDim, WideTensor, generic_spec, launch_spec
    from .check import check_kernel
    from .compiler import (backend_for_stage, compile_kernel, num_warps_choice, ordered_reduces, route,
                           split_dot_loops, unstaged_loads)
    # Each kernel's own -D constants; one that no kernel has is an error before anything compiles. With -k, a
    # constant of another kernel of the file is no mistake (one -D list serves every kernel): ignored
    everyone = program.kernel_names()
    own_of = {n: {k: v for k, v in constants.items() if any(c.name == k for c in program.kernels[n].const_params)}
              for n in dict.fromkeys([*names, *everyone])}
    unknown = [k for k in constants if all(k not in own_of[n] for n in everyone)]
    if unknown:  # a mistake on the command line, not in the program
        from .check import _suggest
        known = sorted({c.name for n in everyone for c in program.kernels[n].const_params})
        hint = _suggest(unknown[0], known) or [f"the constants: {', '.join(known) or 'none'}"]
        print(f"tlec: error: -D {unknown[0]}: no kernel compiled from {filename} has a compile-time constant "
              f"'{unknown[0]}' ({hint[0]})", file=sys.stderr)
        return 2
    checked = {}
    for n in names if args.sizes else ():
        try:
            checked[n] = check_kernel(program, n, own_of[n])
        except TleError:
            pass  # reported below, where that kernel is compiled
    if args.sizes:
        dims = set().union(*(k.dims for k in checked.values()))
        for other in (n for n in everyone if n not in names and set(args.sizes) - dims):
            try:  # with -k, a dim of another kernel of the file is no mistake either (one --sizes serves them all)
                dims |= set(check_kernel(program, other, own_of[other]).dims)
            except TleError:
                pass
        if set(args.sizes) - dims:  # a bad command line, not an error in the program
            bad = sorted(set(args.sizes) - dims)[0]
            constant = any(bad in (c.name for c in program.kernels[n].const_params) for n in names)
            print(f"tlec: error: --sizes {bad}: no kernel compiled from {filename} has a symbolic dim '{bad}' "
                  f"(dims: {', '.join(sorted(dims)) or 'none'})" +
                  (f"; {bad} is a compile-time constant: -D {bad}={args.sizes[bad]}" if constant else ""),
                  file=sys.stderr)
            return 2
    texts, failed, crashed = [], [], False
    for name in names:
        own = own_of[name]
        try:
            spec = None
            if args.generic:
                spec = generic_spec(check_kernel(program, name, own))
            elif args.sizes:
                spec = launch_spec(check_kernel(program, name, own), args.sizes, args.grid, args.sms)
            out = compile_kernel(program, name, own, spec, backend=args.backend, arch=args.arch, stop=args.emit,
                                 num_warps=args.num_warps, num_stages=args.num_stages, occupancy=args.occupancy,
                                 asserts=args.asserts)
        except ValueError as e:  # a stage the chosen backend does not produce
            print(f"tlec: error: {e}", file=sys.stderr)
            return 2
        except TleError as e:  # one kernel's error (one --backend=tileir cannot take): the others still build
            if len(names) == 1:
                raise
            print(str(e), file=sys.stderr)
            failed.append(name)
            crashed = crashed or _tool_failure(e)
            continue
        if args.verbose and args.emit not in ("ast", "tle"):
            how = (f"the native CUDA path (Triton): {out.fallback}" if out.fallback else
                   {"tileir": "the CUDA Tile IR path", "triton": "the native CUDA path (Triton)"}[out.backend])
            forced = args.backend == "auto" and backend_for_stage(args.emit, "auto") != "auto"
            if forced:  # --emit=tileir or ttir chose the path, not auto: say what auto would take
                auto, why = route(out.module, name, args.arch, "auto")
                how += (f", as --emit={args.emit} asks; auto would take " +
                        ("it too" if auto == out.backend else
                         f"the native CUDA path (Triton): {why}" if auto == "triton" else "the CUDA Tile IR path"))
            elif args.backend == "auto" and out.backend == "tileir":  # say why, as for a fallback
                how += (": auto's first choice, and no rule sends this kernel to the native path (docs/tileir.md, "
                        "'Legality', lists what does; --backend=triton compiles it there)")
            print(f"tlec: kernel '{name}' compiled for {args.arch} on {how}", file=sys.stderr)
            wide = sorted(f.tensor for f in out.spec.inside if isinstance(f, WideTensor))
            if wide:
                dims = sorted(f.dim for f in out.spec.inside if isinstance(f, WideDim))
                one = len(dims) == 1
                also = (f", and the dim{'' if one else 's'} {', '.join(dims)}, past it, {'is' if one else 'are'} "
                        "64-bit (an i64 value where the kernel reads it)" if dims else "")
                print(f"tlec: kernel '{name}': {', '.join(wide)} span{'s' if len(wide) == 1 else ''} more than "
                      f"2^31 - 1 elements under these sizes, so their strides and offsets are 64-bit{also} "
                      "(docs/language.md, \"From Python\")", file=sys.stderr)
            for loop in split_dot_loops(out):
                print(f"tlec: kernel '{name}': the loop at {loop.span} runs as two, its last tile alone checked: its "
                      "dot's K is not a multiple of 16 bytes, so a check on every tile would load them element by "
                      "element (docs/language.md, \"Rows of 16 bytes\")", file=sys.stderr)
            for loop, branch, loads in unstaged_loads(out) if out.backend == "triton" else ():
                at = ", ".join(f"{sp.line}:{sp.col}" for sp in loads)
                print(f"tlec: kernel '{name}': the loop at {loop} asks pipeline(stages=...), but its load"
                      f"{'s' if len(loads) > 1 else ''} at {at} {'are' if len(loads) > 1 else 'is'} under the if at "
                      f"{branch.line}:{branch.col}, and the native path's pipeliner stages only the loads at the "
                      "loop's own level: they run unstaged. A loop that walks a list of the blocks to read, rather "
                      "than testing each, keeps its loads staged", file=sys.stderr)
            for span, fn in ordered_reduces(out):
                print(f"tlec: kernel '{name}': the reduce() at {span} keeps the elements' order, as a scan and its "
                      f"last element, because '{fn}' need not commute; if it does (Welford's merge does), "
                      "commutative=true reduces it as a tree, several times less work (docs/language.md, "
                      "\"Reductions and scans\")", file=sys.stderr)
            if out.backend == "triton" and "ptx" in out.stages:
                if args.num_warps is None:
                    warps, why = num_warps_choice(out.kernel)
                    if out.binary.extra.get("shared_warps"):
                        warps, need = out.binary.extra["shared_warps"]
                        why = (f"not the {warps} its tiles call for ({why}), because on {warps} the kernel needs "
                               f"{need} bytes of shared memory, more than a program may have")
                        warps = out.binary.num_threads // 32
                    elif out.binary.extra.get("spilled_warps"):
                        warps, spilled = out.binary.extra["spilled_warps"]
                        scan = out.binary.extra.get("spilled_in") == "scan"
                        why = (f"twice the {warps} its {'tiles' if scan else 'dots'} call for ({why}), because on "
                               f"{warps} ptxas spilled {spilled} bytes per thread of its "
                               f"{'scan' if scan else 'full-precision f32 dot'}")
                        warps = out.binary.num_threads // 32
                    print(f"tlec: kernel '{name}': {warps} warp{'s' if warps != 1 else ''}, the native path's default: "
                          f"{why} (--num-warps N to choose)", file=sys.stderr)
                _report_ptxas(name, out, args.arch)
            elif out.backend == "tileir" and out.binary is not None:
                _report_tileiras(name, out, args.arch, args.occupancy, chosen=args.backend == "auto")
            if out.binary is not None and not args.sizes and not args.generic:
                sizes = ",".join(f"{d}=..." for d in out.kernel.dims) or "M=..."  # this kernel's own dims
                print(f"tlec: kernel '{name}': a build for no sizes in particular: a launch compiles for its own "
                      "(bounds checks it can drop, alignment), so its registers and spills may differ; --sizes "
                      f"{sizes} and --grid X,Y show that launch's binary", file=sys.stderr)
            elif out.binary is not None and args.sizes:
                unsized = [d for d in out.kernel.dims if d not in args.sizes]
                if unsized:  # a launch knows every size: this build may keep checks and offsets that one drops
                    print(f"tlec: kernel '{name}': --sizes gives no size for {', '.join(unsized)}, so the build "
                          "assumes nothing about "
                          f"{'it' if len(unsized) == 1 else 'them'} (a launch compiles for all its sizes: its "
                          "registers and spills may differ)", file=sys.stderr)
        result = out.stages[args.emit]
        if args.emit in BINARY_EMITS:
            path = args.output or f"{name}.{args.emit}"
            if args.output and len(names) > 1 and args.output != os.devnull:  # -o /dev/null: build, keep none
                root, ext = os.path.splitext(args.output)
                path = f"{root}.{name}{ext or '.' + args.emit}"
            with open(path, "wb") as f:
                f.write(result)
            if args.verbose or not args.output or path != args.output:  # -o of several kernels: say where
                print(f"tlec: wrote {path} ({len(result)} bytes, kernel {name}, {args.arch})", file=sys.stderr)
        else:
            texts.append(result if isinstance(result, str) else result.decode())
    if texts:
        _write(args, "\n".join(t.rstrip("\n") + "\n" for t in texts))
    if failed:
        print(f"tlec: {len(failed)} of {len(names)} kernels failed: {', '.join(failed)}", file=sys.stderr)
        return 3 if crashed else 1
    return 0


def _tool_failure(e: TleError) -> bool:
    """Whether an error is tileiras failing without naming a line of the program (targets/tileir.py
    TileirasCrash): not the program's error, so exit 3, as for an internal error."""
    crash = getattr(sys.modules.get("tle.targets.tileir"), "TileirasCrash", None)
    return crash is not None and isinstance(e, crash)


# Why ptxas gives up overlapping wgmmas, as far as it says, and what a kernel author can do about it.
_PTXAS_HINTS = {
    "insufficient register resources": "the accumulators and the pipeline's operands do not fit the registers: "
                                       "more warps (--num-warps) or a smaller tile leave room",
    "non wgmma instructions defining accumulator registers": "the accumulator is written outside the wgmmas, "
                                                             "often on the path where its loop runs zero times; a "
                                                             "loop from a constant to an expression of dims "
                                                             "(range(cdiv(K, BK))) is known to run when compiled "
                                                             "for its sizes (--sizes here, every launch at run "
                                                             "time), one that stops at a scalar parameter is not "
                                                             "(docs/architecture.md, section 3)",
}


def _resident(registers: int, threads: int, shared: int, arch: str, hint: str) -> str:
    """': N programs per SM (the limit: ...)', with what moves a register limit on this path."""
    from .targets.binary import resident_programs
    return _resident_text(*resident_programs(registers, threads, shared, arch), hint)


def _resident_text(programs: int, limit: str, hint: str) -> str:
    return (f": {programs} program{'s' if programs != 1 else ''} per SM (the limit: {limit}"
            f"{'; ' + hint if limit == 'registers' else ''})")


def _report_ptxas(name: str, out, arch: str) -> None:
    """tlec -v on the native path: registers and spills, how many programs an SM holds then, and each of ptxas'
    "Potential Performance Loss" remarks as a warning at the kernel's source line (ptxas itself names no line)."""
    from .diagnostics import Note
    from .targets.triton import ptxas_report
    report = ptxas_report(out.stages["ptx"])
    spilled = (f"{report.spill_stores} bytes spilled to local memory ({report.spill_loads} read back)"
               if report.spill_stores or report.spill_loads else "no spills")
    threads, shared = out.binary.num_threads, out.binary.shared_bytes()  # the PTX came with the binary (_triton)
    print(f"tlec: kernel '{name}': ptxas: {report.registers} registers per thread, {threads} threads, {shared} "
          f"bytes of shared memory, {spilled}" + _resident(report.registers, threads, shared, arch,
                                                          "smaller tiles need fewer"), file=sys.stderr)
    if out.binary.extra.get("spilled_unchecked"):
        print(f"tlec: kernel '{name}': without bounds checks ptxas spilled {out.binary.extra['spilled_unchecked']} "
              "bytes per thread, so the cubin keeps the checks the launch facts would drop (docs/architecture.md, "
              "section 3)", file=sys.stderr)
    for loss in report.losses:
        hints = [Note(h) for key, h in _PTXAS_HINTS.items() if key in loss]
        at, others = _wgmma_spans(out.kernel) if "wgmma" in loss else (out.kernel.span, [])
        hints += [Note("another dot in a loop", span) for span in others]
        print(render(TleError(at, f"ptxas: {loss}", hints), "warning"), file=sys.stderr)


def _wgmma_spans(kernel):
    """Where a remark of ptxas about wgmma belongs (ptxas names no line): the first dot in a loop that adds into an
    accumulator (its wgmmas are the ones overlapped with the next step's), else the first dot in a loop, and the
    other dots in loops as notes; the kernel where no dot is in a loop."""
    from .typed import Const, For, dots
    looped = list(dict.fromkeys((d.span, not isinstance(_unconverted(d.args[2]), Const))
                                for n in kernel.body for loop in _loops(n, For) for d in dots(loop.body)))
    if not looped:
        return kernel.span, []
    first = next((span for span, accumulates in looped if accumulates), looped[0][0])
    return first, [span for span, _ in looped if span is not first]


def _unconverted(e):
    """A dot's accumulator without the broadcast that makes a tile of a constant 0 (a dot without acc=)."""
    while getattr(e, "name", None) in ("splat", "broadcast", "cast") and e.args:
        e = e.args[0]
    return e


def _loops(stmt, loop_type):
    """The outermost loops at or under stmt (a statement of a checked kernel)."""
    if isinstance(stmt, loop_type):
        yield stmt
        return
    for part in ("then", "orelse"):
        for s in getattr(stmt, part, None) or []:
            yield from _loops(s, loop_type)


def _report_tileiras(name: str, out, arch: str, asked: int | None = None, chosen: bool = False) -> None:
    """tlec -v on the Tile IR path: what tileiras gave the kernel, and how many programs that lets an SM hold.
    `chosen`: auto took the path (by rules, not by compiling both)."""
    extra = out.binary.extra
    registers, threads = extra.get("registers"), out.binary.num_threads
    if registers is None:
        return
    shared = out.binary.shared_bytes()
    spilled = f"{extra['stack_bytes']} bytes of stack (spills)" if extra.get("stack_bytes") else "no spills"
    from .targets.binary import resident_programs
    programs, limit = resident_programs(registers, threads, shared, arch)
    print(f"tlec: kernel '{name}': tileiras: {registers} registers per thread, {threads} threads, {shared} bytes "
          f"of shared memory, {spilled}" + _resident_text(programs, limit, "--occupancy N asks tileiras to fit N"),
          file=sys.stderr)
    if asked is not None and programs < asked:  # a hint, which tileiras may not meet: say so, as ptxas' losses
        print(f"tlec: kernel '{name}': --occupancy {asked} is a hint tileiras did not meet: {programs} program"
              f"{'s' if programs != 1 else ''} per SM (the limit: {limit})", file=sys.stderr)
    if extra.get("stack_bytes"):
        from .diagnostics import render
        notes = ["smaller tiles need fewer registers"]
        from .compiler import SPILL_BYTES_KEPT
        if extra.get("occupancy_why") and extra["stack_bytes"] <= SPILL_BYTES_KEPT:
            hint = extra["occupancy_why"][0]
            notes.append(f"the lowering's occupancy hint of {hint} programs per SM caps a thread at "
                         f"{65536 // (hint * threads)} registers; a spill of at most {SPILL_BYTES_KEPT} bytes "
                         f"keeps it, as one that small cost less than fewer programs per SM (attention, H200), "
                         f"and --occupancy N sets another")
        if chosen:  # (a porter's paged attention: 520 bytes here, none on the native path)
            notes.append("auto took the Tile IR path by its rules, without compiling the native one: "
                         "--backend triton -v shows that path's registers and spills, and tune(backend=[triton, "
                         "tileir]) times both (docs/tuning.md)")
        spill = TleError(out.kernel.span, f"tileiras spilled {extra['stack_bytes']} bytes per thread to local memory",
                         notes)
        print(render(spill, "warning"), file=sys.stderr)
    if extra.get("occupancy_why"):
        hint, why = extra["occupancy_why"]
        print(f"tlec: kernel '{name}': occupancy hint {hint}, the lowering's choice: {why} (docs/tileir.md, "
              "\"Performance\"; --occupancy N to choose)", file=sys.stderr)
    if extra.get("latency_why"):
        print(f"tlec: kernel '{name}': {extra['latency_why']} (docs/tileir.md, \"Performance\")", file=sys.stderr)
    for what, why in extra.get("retry_failed", ()):
        print(f"tlec: kernel '{name}': tileiras failed on the retry {what} ({why}), so that retry was dropped and the "
              "binary compiled before it kept", file=sys.stderr)
    if extra.get("fma_count"):
        n = extra["fma_count"]
        print(f"tlec: kernel '{name}': {n} product{'s' if n > 1 else ''} added once fused to fma, as ptxas does on "
              "the native path (tileiras does not contract); each rounds once where the interpreter rounds twice "
              "(docs/numerics.md)", file=sys.stderr)
    for window in extra.get("windows", ()):
        print(f"tlec: kernel '{name}': {window} (docs/language.md, \"Memory: slices of a tensor\")", file=sys.stderr)
    if extra.get("spilled_under"):
        hint, spilled, kept = extra["spilled_under"]
        under = f"under the lowering's occupancy hint of {hint} programs per SM" if hint else "without a hint"
        print(f"tlec: kernel '{name}': tileiras spilled {spilled} bytes per thread {under}, so the cubin was "
              f"compiled with {f'a hint of {kept}' if kept else 'no hint'} (--emit=tileir shows the first)",
              file=sys.stderr)
    if extra.get("spilled_on_4_warps"):
        print(f"tlec: kernel '{name}': tileiras spilled {extra['spilled_on_4_warps']} bytes per thread on its 4 "
              "worker warps, so the cubin was compiled on 8 (--emit=tileir shows the first)", file=sys.stderr)
    if extra.get("persistent"):
        print(f"tlec: kernel '{name}': runs its grid as a persistent loop: the runtime starts one wave of programs, "
              "each walking the grid's programs in order (a short K over several waves: docs/tileir.md)",
              file=sys.stderr)
    if extra.get("one_program"):
        print(f"tlec: kernel '{name}': without a hint tileiras gave {extra['one_program']} registers per thread, one "
              f"program per SM (its block is 8 worker warps, 256 threads x {extra['one_program']} registers, and an SM "
              "has 65536), so the cubin was compiled with a hint of 2 (--emit=tileir shows the first)", file=sys.stderr)
    if extra.get("few_warps"):
        registers, programs, warps, hint = extra["few_warps"]
        print(f"tlec: kernel '{name}': without a hint tileiras gave {registers} registers per thread, {programs} "
              f"programs of {warps} warps per SM, so on this launch of more than two waves the cubin was compiled "
              f"with a hint of {hint} (--emit=tileir shows the first)", file=sys.stderr)


def _parse_launch(sizes: str | None, grid: str | None, generic: bool, parser):
    """--sizes M=4096,N=1024 -> {"M": 4096, "N": 1024}; --grid 4096 -> (4096, 1, 1)."""
    if (sizes or grid) and generic:
        parser.error("--generic assumes nothing about the arguments; it cannot take --sizes or --grid")
    if grid and not sizes:
        parser.error("--grid needs --sizes: which tiles a grid keeps inside depends on the sizes")
    out = {}
    for item in (sizes or "").split(","):
        if not item.strip():
            continue
        name, eq, value = item.partition("=")
        try:
            n = int(value)
        except ValueError:
            n = 0
        if not eq or not name.strip().isidentifier() or n <= 0:
            parser.error(f"--sizes {item}: expected DIM=N with a positive integer N, e.g. --sizes M=4096,N=1024")
        out[name.strip()] = n
    dims = None
    if grid:
        try:
            dims = tuple(int(g) for g in grid.split(","))
        except ValueError:
            dims = ()
        if not 1 <= len(dims) <= 3 or any(g <= 0 for g in dims):
            parser.error(f"--grid {grid}: expected 1 to 3 positive integers, e.g. --grid 4096 or --grid 32,32")
        dims = dims + (1,) * (3 - len(dims))
    return out, dims


def _write(args, text: str) -> None:
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def _tune_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tlec tune",
        description="Autotune a kernel for one problem shape on the GPU and store the best configuration in the "
                    "tuning database (TLE_TUNE_DB; docs/tuning.md). Launches of the kernel with a tuning space then "
                    "use it for every shape of the same bucket.",
        epilog="example:\n  tlec tune examples/matmul.tle --kernel matmul --shape M=4096,N=4096,K=4096 --dtype f16 \\\n"
               "      -P BM=64,128,256 -P BN=64,128,256 -P BK=32,64 -P num_warps=4,8 --grid 'cdiv(M,BM),cdiv(N,BN)'\n"
               "exit codes: 0 ok; 1 an error in the program, the tuning database, or no configuration worked;\n"
               "2 a bad command line (a flag, its value, a file it names that cannot be read or written, no GPU "
               "for --device cuda).",
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("file", nargs="?", help="the .tle source file (optional with only --import/--export)")
    p.add_argument("--kernel", "-k", metavar="NAME", help="the kernel (required when the file has several)")
    p.add_argument("--shape", default="", metavar="M=4096,N=4096",
                   help="the symbolic dims of the problem; tensors are made from them, random normal (floats) or "
                        "zeros (integers, so that index tensors stay in bounds)")
    p.add_argument("--dtype", metavar="T", help="the element type of every dtype constant not set with -D and not "
                                                "tuned (f16, ...)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="a compile-time constant held fixed")
    p.add_argument("-P", "--param", dest="params", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="a tuned parameter and its values: a constant, num_warps, num_stages, backend or "
                        "occupancy (None for the lowering's choice) (default: the space the kernel declares)")
    p.add_argument("--grid", metavar="EXPR",
                   help="the launch grid, an expression of dims and constants with cdiv/min/max, e.g. "
                        "'cdiv(M, BM), cdiv(N, BN)'")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE", help="a scalar parameter's value")
    p.add_argument("--key-dims", metavar="M,N", help="the dims whose buckets key the result (default: all)")
    p.add_argument("--backend", choices=("auto", "triton", "tileir", "interp"), default="auto",
                   help="the backend when it is not tuned (default auto)")
    p.add_argument("--device", default="cuda", help="cuda (default), or cpu for the interpreter")
    p.add_argument("--budget-s", type=float, default=120.0, help="wall-clock budget of the tuning (default 120)")
    p.add_argument("--max-candidates", type=int, default=128, help="most configurations compiled (default 128)")
    p.add_argument("--jobs", type=int, help="compile processes (default: CPUs - 1)")
    p.add_argument("--force", action="store_true", help="tune again even if the database has this bucket")
    p.add_argument("--export", metavar="F", help="afterwards, write the whole database to F (JSON)")
    p.add_argument("--import", dest="import_", metavar="F", help="first, add the results in F to the database")
    return p


def _scalar(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def tune_main(argv: list[str]) -> int:
    parser = _tune_parser()
    args = parser.parse_args(argv)
    from .runtime import tuning
    _check_tune_flags(args, parser)
    try:
        if args.import_:
            try:
                n = tuning.import_(args.import_)
            except tuning.TuneImportError as e:
                parser.error(f"--import: {e}")
            print(f"tlec tune: imported {n} results from {args.import_}", file=sys.stderr)
        if args.file:
            code = _tune_file(args, parser)
            if code:
                return code
        elif not (args.import_ or args.export):
            parser.error("give a FILE to tune (or only --import/--export)")
        if args.export:
            print(f"tlec tune: exported {tuning.export(args.export)} results to {args.export}", file=sys.stderr)
        return 0
    except (TleError, tuning.TuneError, ValueError) as e:
        print(f"tlec tune: error: {e}" if not isinstance(e, TleError) else str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _check_tune_flags(args, parser) -> None:
    """What can be checked before any work: the numbers, the files named, the device (exit 2 on a bad one)."""
    import math
    if not math.isfinite(args.budget_s) or args.budget_s <= 0:
        parser.error(f"--budget-s {args.budget_s:g}: give a positive number of seconds")
    if args.max_candidates <= 0:
        parser.error(f"--max-candidates {args.max_candidates}: give a positive count")
    if args.jobs is not None and args.jobs <= 0:
        parser.error(f"--jobs {args.jobs}: give a positive count of compile processes")
    if args.file and not os.path.isfile(args.file):
        parser.error(f"no file {args.file!r}" if not os.path.isdir(args.file) else f"{args.file!r} is a directory")
    if args.import_ and not os.path.isfile(args.import_):
        parser.error(f"--import {args.import_}: no such file")
    if args.export:
        folder = os.path.dirname(os.path.abspath(args.export))
        if os.path.isdir(args.export) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            why = "is a directory" if os.path.isdir(args.export) else \
                f"its folder {folder} {'does not exist' if not os.path.isdir(folder) else 'cannot be written'}"
            parser.error(f"--export {args.export}: {why}")
    if args.file:
        import torch
        try:
            device = torch.device(args.device)
        except RuntimeError:
            parser.error(f"--device {args.device}: expected cuda, cuda:N or cpu")
        if device.type not in ("cuda", "cpu"):
            parser.error(f"--device {args.device}: expected cuda, cuda:N or cpu")
        if device.type == "cuda" and not torch.cuda.is_available():
            parser.error(f"--device {args.device}: no CUDA GPU here (torch.cuda.is_available() is False); tuning "
                         "times the GPU. --device cpu tunes on the interpreter, for a test of the command")


def _pairs(text: str, what: str, parser) -> dict:
    out = {}
    for part in filter(None, (t.strip() for t in text.split(","))):
        name, eq, value = part.partition("=")
        if not eq or not name.strip().isidentifier():
            parser.error(f"{what} {part!r}: expected NAME=VALUE")
        out[name.strip()] = _scalar(value.strip())
    return out


def _tune_params(texts: list, parser) -> dict:
    """-P NAME=V1,V2 ... as {name: [values]}; None (or none) is a value (occupancy)."""
    params = {}
    for text in texts:
        pname, eq, values = text.partition("=")
        pname = pname.strip()
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not eq or not pname.isidentifier() or not items:
            parser.error(f"-P {text}: expected NAME=V1,V2,...")
        if pname in params:
            parser.error(f"-P {pname} is given twice: give its values once, -P {pname}=V1,V2,...")
        params[pname] = [None if v in ("None", "none") else _scalar(v) for v in items]
    return params


def _tune_grid(expr: str, meta: dict, parser):
    """The --grid expression as a function of meta, checked on `meta` now: a bad grid is a command-line error,
    found before the database is asked or anything is compiled."""
    def cdiv(a, b):
        return -(-a // b)

    def grid(m):
        return eval(f"({expr},)", {"__builtins__": {}}, {"cdiv": cdiv, "min": min, "max": max, **m})  # noqa: S307
    try:
        value = grid(meta)
    except Exception as e:  # noqa: BLE001 - the user's expression: say what it does wrong
        parser.error(f"--grid {expr!r}: {type(e).__name__}: {e} (names: {', '.join(sorted(meta))}, cdiv, min, max)")
    if not 1 <= len(value) <= 3 or not all(type(g) is int for g in value):
        parser.error(f"--grid {expr!r} gives {value}: expected 1 to 3 integers")
    if any(g <= 0 for g in value):
        parser.error(f"--grid {expr!r} gives {value}: no program would run")
    return grid


def _tune_file(args, parser) -> int:
    import torch
    from . import api
    from .check import check_kernel
    from .runtime import tuning
    from .runtime.kernel import torch_dtype
    from .typed import TensorParam
    mod = api.compile(args.file, backend=args.backend)
    names = mod.program.kernel_names()
    name = args.kernel or (names[0] if len(names) == 1 else None)
    if name is None or name not in mod.kernels:
        parser.error(f"--kernel: choose one of {', '.join(names)}")
    kernel = mod.kernels[name]
    params = _tune_params(args.params, parser)
    settings = {"budget_s": args.budget_s, "max_candidates": args.max_candidates, "jobs": args.jobs}
    if args.key_dims:
        settings["key_dims"] = [d.strip() for d in args.key_dims.split(",") if d.strip()]
    try:
        if params:
            kernel.tune_space = tuning.TuneSpace(params, **settings)
        elif kernel.tune_space is not None:
            for k, v in settings.items():
                setattr(kernel.tune_space, k, v)
        else:
            parser.error(f"kernel '{name}' declares no tuning space: give -P NAME=V1,V2,...")
        kernel.tune_space.check().validate(kernel.decl)
    except ValueError as e:
        parser.error(f"{'--key-dims' if 'key_dims' in str(e) else '-P'}: {e}")
    if not args.grid:
        parser.error("--grid is required, e.g. --grid 'cdiv(M, BM), cdiv(N, BN)'")
    constants = dict(parse_define(d, parser) for d in args.defines)
    for c in kernel.decl.const_params:  # a tuned dtype constant (an accumulation type) stays tuned
        if c.kind == "dtype" and c.name not in constants and c.name not in kernel.tune_space.params and args.dtype:
            constants[c.name] = args.dtype
    dims = _pairs(args.shape, "--shape", parser)
    declared = {d.id for p in kernel.decl.params for d in getattr(p.type, "dims", ()) if hasattr(d, "id")}  # named
    for d, n in dims.items():
        if d not in declared:
            parser.error(f"--shape {d}={n}: kernel '{name}' has no dim {d} (its dims: {', '.join(sorted(declared))})")
        if type(n) is not int or n <= 0:
            parser.error(f"--shape {d}={n}: a dim is a positive integer")
    scalars = _pairs(",".join(args.arg), "--arg", parser)
    probe = {k: v[0] for k, v in kernel.tune_space.params.items() if k not in tuning.OPTIONS}
    checked = check_kernel(mod.program, name, {**probe, **constants})
    device = torch.device(args.device)
    tensors = []
    for p in checked.params:
        if isinstance(p, TensorParam):
            missing = [d for d in p.type.dims if isinstance(d, str) and d not in dims]
            if missing:
                parser.error(f"--shape: give {', '.join(missing)} (tensor '{p.name}' is {p.type})")
            shape = [d if isinstance(d, int) else int(dims[d]) for d in p.type.dims]
            dt = torch_dtype(p.type.dtype)
            tensors.append(torch.randn(shape, device=device).to(dt) if dt.is_floating_point
                           else torch.zeros(shape, device=device, dtype=dt))
        else:
            if p.name not in scalars:
                parser.error(f"--arg: give the scalar parameter {p.name} ({p.type})")
            tensors.append(scalars[p.name])
    grid = _tune_grid(args.grid, {**checked.constants, **dims}, parser)
    result = kernel.tune(grid, *tensors, force=args.force, **constants)
    where = (f"{torch.cuda.get_device_name(device)} ({tuning._device_info(device)[1]})" if device.type == "cuda"
             else "the interpreter (CPU)")
    print(f"tlec tune: {name} on {where}, {args.shape or 'no dims'}"
          + (f", {args.dtype}" if args.dtype else ""))
    print(f"  best     {tuning._show(result.config)}: {result.time_s * 1e3:.4f} ms")
    if result.config == result.default_config:
        print("  default  the same configuration")
    elif result.default_time_s:
        print(f"  default  {tuning._show(result.default_config)}: {result.default_time_s * 1e3:.4f} ms "
              f"({result.default_time_s / result.time_s:.2f}x slower)")
    st = result.stats
    how = "from the tuning database (--force tunes again)" if result.from_db else "tuned now"
    print(f"  {how}: {st.get('space')} configurations, {st.get('candidates')} after pruning, "
          f"{st.get('compiled')} compiled, {st.get('timed')} timed, {st.get('seconds')} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
