"""tlec: the tle command-line compiler.

    tlec FILE [--kernel NAME] [-D NAME=VALUE ...] [--emit=STAGE] [--arch sm_90] [-o OUT]

Runs the pipeline of tle/compiler.py and stops after --emit's stage. Exit codes: 0 ok, 1 an error in the program
(printed as file:line:col: error: ...), 2 a bad command line, 3 an internal compiler error (a bug in tle).
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback

from . import debug
from .diagnostics import TleError

EMITS = ("ast", "tle", "ttir", "ttgir", "llir", "ptx", "tileir", "tilebc", "cubin")
BINARY_EMITS = ("cubin", "tilebc")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tlec",
        description="Compile a .tle file: parse, check, lower to the tle dialect, then to CUDA Tile IR or Triton TTIR, "
                    "and build a cubin. "
                    "Each --emit value stops after that stage and prints (or writes) its output.",
        epilog="exit codes: 0 ok; 1 an error in the program; 2 a bad command line; 3 an internal error.\n"
               "examples:\n"
               "  tlec examples/softmax.tle --emit=ttir\n"
               "  tlec examples/matmul.tle --kernel matmul -D BM=128 --emit=cubin --arch sm_90 -o mm.cubin\n"
               "  tlec examples/softmax.tle --emit=tileir\n"
               "  tlec examples/softmax.tle --emit=cubin --backend=tileir -o softmax.cubin\n"
               "environment: TLE_DEBUG=1..4 (stage times, IR after each stage, tracebacks).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="the .tle source file ('-' reads standard input)")
    p.add_argument("--kernel", "-k", metavar="NAME", help="compile only this kernel (default: every kernel)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="set a compile-time constant: an int, a float, true/false or an element type (f16, ...)")
    p.add_argument("--emit", choices=EMITS, default="cubin",
                   help="the stage to stop after (default: cubin). ast: the syntax tree; tle: the tle MLIR "
                        "dialect; ttir: Triton IR; ttgir, llir, ptx: Triton's later stages (native CUDA path); "
                        "tileir: CUDA Tile IR; tilebc: its bytecode (Tile IR path); cubin: the binary")
    p.add_argument("--backend", choices=("auto", "triton", "tileir"), default="auto",
                   help="auto (default): CUDA Tile IR when the kernel, the arch and this machine allow it, else "
                        "the native CUDA path (Triton), saying why with -v; triton or tileir force one (a forced "
                        "tileir on a kernel it cannot take is an error that says why)")
    p.add_argument("--arch", default="sm_90", help="GPU architecture, e.g. sm_80, sm_90 (default: sm_90)")
    p.add_argument("--num-warps", type=int, default=4, help="warps per program on the Triton path (default 4)")
    p.add_argument("--num-stages", type=int, default=3,
                   help="default software-pipelining depth for loops without pipeline(...) (default 3)")
    p.add_argument("--generic", action="store_true",
                   help="assume nothing about the arguments (default: 16-byte aligned base pointers and "
                        "contiguous rows, as torch tensors usually are)")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="write the output here (default: text to standard output; a cubin to KERNEL.cubin)")
    p.add_argument("-v", "--verbose", action="store_true", help="say which stages ran and where output went")
    return p


def parse_define(text: str, parser: argparse.ArgumentParser):
    if "=" not in text:
        parser.error(f"-D {text}: expected NAME=VALUE")
    name, value = text.split("=", 1)
    if not name.isidentifier():
        parser.error(f"-D {text}: '{name}' is not a name")
    low = value.lower()
    if low in ("true", "false"):
        return name, low == "true"
    for conv in (int, float):
        try:
            return name, conv(value)
        except ValueError:
            pass
    if value.replace("_", "").isalnum():
        return name, value  # an element type such as f16; the checker validates it
    parser.error(f"-D {text}: '{value}' is not a number, a boolean or a type name")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    constants = dict(parse_define(d, parser) for d in args.defines)
    arch = args.arch
    if not (arch.startswith("sm_") and arch[3:].isdigit()):
        parser.error(f"--arch {arch}: expected sm_NN, e.g. sm_90")
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
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - a bug in tle, not in the user's program
        print(f"tlec: internal compiler error: {type(e).__name__}: {e}", file=sys.stderr)
        if debug.level() >= 4:
            traceback.print_exc()
        else:
            print("  (set TLE_DEBUG=4 for a traceback; please report it)", file=sys.stderr)
        return 3


def _run(args, text: str, filename: str, constants: dict) -> int:
    from .check import load_program
    from .parser import parse
    from .ast import dump
    if args.emit == "ast":
        _write(args, dump(parse(text, filename)) + "\n")
        return 0
    program = load_program(text, filename)
    names = [args.kernel] if args.kernel else program.kernel_names()
    if not names:
        raise TleError(None, f"{filename} declares no kernel")
    if args.kernel and args.kernel not in program.kernels:
        from .check import check_kernel
        check_kernel(program, args.kernel)  # raises the "no kernel named" error with suggestions
    from .abi import generic_spec
    from .check import check_kernel
    from .compiler import compile_kernel
    texts = []
    for name in names:
        own = {k: v for k, v in constants.items() if any(c.name == k for c in program.kernels[name].const_params)}
        unknown = [k for k in constants if all(k not in {c.name for c in program.kernels[n].const_params}
                                               for n in names)]
        if unknown:
            raise TleError(program.kernels[name].span, f"-D {unknown[0]}: no kernel in {filename} has a "
                                                       f"compile-time constant '{unknown[0]}'")
        spec = generic_spec(check_kernel(program, name, own)) if args.generic else None
        try:
            out = compile_kernel(program, name, own, spec, backend=args.backend, arch=args.arch, stop=args.emit,
                                 num_warps=args.num_warps, num_stages=args.num_stages)
        except ValueError as e:  # a stage the chosen backend does not produce
            print(f"tlec: error: {e}", file=sys.stderr)
            return 2
        if args.verbose and args.emit not in ("ast", "tle"):
            how = (f"the native CUDA path (Triton): {out.fallback}" if out.fallback else
                   {"tileir": "the CUDA Tile IR path", "triton": "the native CUDA path (Triton)"}[out.backend])
            print(f"tlec: kernel '{name}' compiled for {args.arch} on {how}", file=sys.stderr)
        result = out.stages[args.emit]
        if args.emit in BINARY_EMITS:
            path = args.output or f"{name}.{args.emit}"
            if args.output and len(names) > 1:
                root, ext = os.path.splitext(args.output)
                path = f"{root}.{name}{ext or '.' + args.emit}"
            with open(path, "wb") as f:
                f.write(result)
            if args.verbose or not args.output:
                print(f"tlec: wrote {path} ({len(result)} bytes, kernel {name}, {args.arch})", file=sys.stderr)
        else:
            texts.append(result if isinstance(result, str) else result.decode())
    if texts:
        _write(args, "\n".join(t.rstrip("\n") + "\n" for t in texts))
    return 0


def _write(args, text: str) -> None:
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    sys.exit(main())
