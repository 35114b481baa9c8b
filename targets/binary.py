"""Binary: a compiled kernel, the hand-off between a backend (targets/) and the launcher (runtime/launch.py).

Both backends end here: targets/triton.py (TTIR -> cubin) and targets/tileir.py (Tile IR -> cubin) each return a
Binary, and runtime/launch.py needs nothing else to run it. A Binary is plain data, so the on-disk cache can store
it with `to_bytes()` and read it back with `Binary.from_bytes()`.

Serialized form (no pickle, so a cache file cannot run code when read):

    b"TLEBIN1\\n" | header length (8 bytes, little-endian) | JSON header | blob | blob | ...

The header holds every field; bytes values (the cubin, bytecode stages) are replaced by {"blob": i, "size": n}
and their contents follow the header in order.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field

from tle.diagnostics import source_line

_MAGIC = b"TLEBIN1\n"

# Kernel parameter types a Binary may declare, in the spelling of MLIR's scalar types; "ptr" is a global pointer.
PARAM_TYPES = ("ptr", "i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")


@dataclass
class Binary:
    backend: str                 # "triton" or "tileir"
    arch: str                    # "sm_90", "sm_80", ...
    name: str                    # the kernel's symbol in the cubin
    cubin: bytes                 # an ELF image for cuModuleLoadData
    params: list[str]            # the explicit parameters the caller passes, in ABI order (PARAM_TYPES)
    num_threads: int             # the block size (x) the cubin must be launched with
    shared_mem: int = 0          # dynamic shared memory per block, in bytes
    stages: dict[str, str | bytes] = field(default_factory=dict)  # intermediate forms: "ttgir", "ptx", "tilebc", ...
    extra: dict = field(default_factory=dict)  # backend specifics the launcher honours (JSON values only)

    def shared_bytes(self) -> int:
        """Shared memory one program takes: Triton's cubins ask for theirs at launch (shared_mem), tileiras' declare
        theirs statically (extra["static_shared_mem"])."""
        return self.shared_mem + self.extra.get("static_shared_mem", 0)

    def __post_init__(self) -> None:
        bad = [p for p in self.params if p not in PARAM_TYPES]
        if bad:
            raise ValueError(f"kernel {self.name}: unknown parameter types {bad}; known: {PARAM_TYPES}")

    def to_bytes(self) -> bytes:
        blobs: list[bytes] = []

        def out(value):
            if isinstance(value, (bytes, bytearray)):
                blobs.append(bytes(value))
                return {"blob": len(blobs) - 1, "size": len(value)}
            return value

        header = {
            "backend": self.backend, "arch": self.arch, "name": self.name, "cubin": out(self.cubin),
            "params": list(self.params), "num_threads": self.num_threads, "shared_mem": self.shared_mem,
            "stages": {k: out(v) for k, v in self.stages.items()}, "extra": self.extra,
        }
        head = json.dumps(header, sort_keys=True).encode("utf-8")
        return b"".join([_MAGIC, struct.pack("<Q", len(head)), head, *blobs])

    @classmethod
    def from_bytes(cls, data: bytes) -> "Binary":
        if not data.startswith(_MAGIC):
            raise ValueError("not a serialized tle Binary (bad magic)")
        start = len(_MAGIC) + 8
        (head_len,) = struct.unpack_from("<Q", data, len(_MAGIC))
        header = json.loads(data[start:start + head_len].decode("utf-8"))
        offsets = []  # blob i starts at offsets[i]
        pos = start + head_len

        def sizes(value):
            if isinstance(value, dict) and set(value) == {"blob", "size"}:
                yield value["blob"], value["size"]

        refs = sorted([*sizes(header["cubin"])] + [r for v in header["stages"].values() for r in sizes(v)])
        for _, size in refs:
            offsets.append(pos)
            pos += size
        if pos != len(data):
            raise ValueError(f"serialized Binary is {len(data)} bytes, header describes {pos}")

        def back(value):
            if isinstance(value, dict) and set(value) == {"blob", "size"}:
                at = offsets[value["blob"]]
                return data[at:at + value["size"]]
            return value

        return cls(
            backend=header["backend"], arch=header["arch"], name=header["name"], cubin=back(header["cubin"]),
            params=header["params"], num_threads=header["num_threads"], shared_mem=header["shared_mem"],
            stages={k: back(v) for k, v in header["stages"].items()}, extra=header["extra"],
        )


# Per-SM limits (CUDA occupancy calculator's figures): registers, shared memory (with 1 KB the driver reserves per
# CTA), resident threads and CTAs. Shared memory per SM differs by architecture; unlisted ones take sm_90's.
_SM_SHARED = {"sm_80": 167936, "sm_86": 102400, "sm_87": 167936, "sm_89": 102400, "sm_90": 233472}


def max_shared_per_program(arch: str = "sm_90") -> int:
    """The most shared memory one program (CTA) may have: the SM's, less the 1 KB the driver reserves per CTA
    (cudaDevAttrMaxSharedMemoryPerBlockOptin: 232448 bytes on sm_90). A binary asking for more cannot launch."""
    return _SM_SHARED.get(arch, _SM_SHARED["sm_90"]) - 1024


def resident_programs(registers: int, threads: int, shared_bytes: int, arch: str = "sm_90") -> tuple[int, str]:
    """(programs per SM, what limits them) for a kernel of `registers` per thread and `threads` per program:
    registers are allocated per warp in units of 256 (8 per thread), 65536 per SM; 2048 threads and 32 CTAs per SM;
    shared memory as _SM_SHARED says. How tlec -v explains an occupancy on either path (a cross-entropy at 133
    registers fits 3 programs of 128 threads, at 128 registers 4). "registers" is named only when nothing else
    limits as much."""
    warps = -(-threads // 32)
    limits = {  # in this order, so that a tie names a limit other than registers (which alone a hint can move)
        "threads": 2048 // max(threads, 1),
        "shared memory": _SM_SHARED.get(arch, _SM_SHARED["sm_90"]) // (shared_bytes + 1024),
        "CTAs": 32,
        "registers": 65536 // (warps * 32 * (-(-max(registers, 1) // 8) * 8)),
    }
    limit = min(limits, key=limits.get)
    return limits[limit], limit


# ---- what a cubin records about its kernel (both backends' cubins) ---------------------------------------------

@dataclass(frozen=True)
class KernelAttributes:
    reqntid: tuple[int, int, int]   # the exact block size the kernel must be launched with
    param_sizes: list[int]          # bytes of each parameter, in ordinal order
    static_shared: int              # bytes of statically declared shared memory, as the driver counts them
    registers: int | None = None    # registers per thread (EIATTR_REGCOUNT; 255 is the most a thread can have)
    stack: int = 0                  # bytes of local memory per thread (EIATTR_FRAME_SIZE): > 0 means spills


# .nv.info attribute ids (cuobjdump -elf names them) and formats. REGCOUNT and FRAME_SIZE are in the shared .nv.info
# section, each as (symbol index, value).
_EIATTR_KPARAM_INFO, _EIATTR_KPARAM_INFO_V2, _EIATTR_REQNTID, _EIATTR_MAX_THREADS = 0x17, 0x45, 0x10, 0x05
_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE = 0x2F, 0x11
# A cubin with a `.nv.shared.reserved.0` section counts the shared memory the driver reserves per CTA (1 KB from
# sm_80 on: CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK) inside the kernel's `.nv.shared.<kernel>`
# section: Triton's cubins, whose shared memory is all dynamic, have a section of exactly 1024 bytes. On the H200
# cuFuncGetAttribute(SHARED_SIZE_BYTES) gave the section's size less 1024 for tileiras cubins of 105680, 224544 and
# 232728 bytes; counting the 1024 as the kernel's made tlec -v say a 232728-byte kernel fits 0 programs per SM.
_RESERVED_SHARED = 1024
_EIFMT_SVAL = 0x04


def _elf_sections(cubin: bytes) -> dict[str, bytes]:
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]

    def name(offset: int) -> str:
        return cubin[names_at + offset: cubin.index(b"\0", names_at + offset)].decode()

    sections = {}
    for h in headers:
        sh_name, sh_type, _, _, sh_offset, sh_size = h[:6]
        # NOBITS (8) sections have a size but no contents; keep the size as zero bytes of that length.
        sections[name(sh_name)] = bytes(sh_size) if sh_type == 8 else cubin[sh_offset:sh_offset + sh_size]
    return sections


def _nv_info(data: bytes):
    """Entries of an .nv.info section: (attribute, value bytes). Each is format (1 byte), attribute (1 byte), then
    for EIFMT_SVAL a 2-byte size and that many bytes, else 2 bytes of value."""
    at = 0
    while at + 4 <= len(data):
        fmt, attr = data[at], data[at + 1]
        if fmt == _EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", data, at + 2)
            yield attr, data[at + 4: at + 4 + size]
            at += 4 + size
        else:
            yield attr, data[at + 2: at + 4]
            at += 4


def _symbol_index(sections: dict[str, bytes], name: str) -> int | None:
    """The .symtab index of symbol `name` (Elf64_Sym entries of 24 bytes, names in .strtab)."""
    symtab, strtab = sections.get(".symtab", b""), sections.get(".strtab", b"")
    for i in range(len(symtab) // 24):
        (st_name,) = struct.unpack_from("<I", symtab, i * 24)
        if strtab[st_name: strtab.find(b"\0", st_name)] == name.encode():
            return i
    return None


def kernel_attributes(cubin: bytes, kernel: str) -> KernelAttributes:
    """The launch facts a cubin records for kernel: required block size, parameter sizes, static shared memory."""
    sections = _elf_sections(cubin)
    info = sections.get(f".nv.info.{kernel}")
    if info is None:
        raise ValueError(f"cubin has no .nv.info.{kernel} section (kernels: "
                         f"{[s[9:] for s in sections if s.startswith('.nv.info.')]})")
    reqntid = max_threads = None
    params: dict[int, int] = {}
    for attr, value in _nv_info(info):
        if attr == _EIATTR_REQNTID:
            reqntid = struct.unpack_from("<III", value)
        elif attr == _EIATTR_MAX_THREADS:
            max_threads = struct.unpack_from("<III", value)
        elif attr in (_EIATTR_KPARAM_INFO, _EIATTR_KPARAM_INFO_V2):
            # index (4 bytes), ordinal (2), offset (2), then the size: bits 18-31 in V1, bits 0-15 in V2 (which
            # tileiras writes for some sm_90 kernels); both read as cuobjdump -elf prints them.
            _, ordinal, _, flags = struct.unpack_from("<IHHI", value)
            params[ordinal] = (flags >> 18) & 0x3FFF if attr == _EIATTR_KPARAM_INFO else flags & 0xFFFF
    if reqntid is None:
        if max_threads is None:
            raise ValueError(f"cubin kernel {kernel} records no required block size (EIATTR_REQNTID)")
        reqntid = max_threads
    registers, stack = None, 0
    symbol = _symbol_index(sections, kernel)
    for attr, value in _nv_info(sections.get(".nv.info", b"")):
        if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and len(value) >= 8:
            index, amount = struct.unpack_from("<II", value)
            if index == symbol:
                if attr == _EIATTR_REGCOUNT:
                    registers = amount
                else:
                    stack = amount
    shared = len(sections.get(f".nv.shared.{kernel}", b""))
    if ".nv.shared.reserved.0" in sections:  # the section holds the driver's reserved block too: not the kernel's
        shared = max(0, shared - _RESERVED_SHARED)
    return KernelAttributes(tuple(reqntid), [params[i] for i in sorted(params)], shared, registers, stack)


# ---- disassembly -------------------------------------------------------------------------------------------------

def find_nvdisasm() -> str:
    """nvdisasm: $TLE_NVDISASM, else the one Triton's wheel bundles (backends/nvidia/bin, beside its ptxas), else
    CUDA's ($CUDA_HOME/bin) or PATH's."""
    if env := os.environ.get("TLE_NVDISASM"):
        return env
    try:
        import triton
        bundled = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
        if os.access(bundled, os.X_OK):
            return bundled
    except ImportError:
        pass
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", "nvdisasm"), os.X_OK):
            return os.path.join(root, "bin", "nvdisasm")
    if found := shutil.which("nvdisasm"):
        return found
    raise FileNotFoundError("nvdisasm not found: install triton (its wheel bundles one), set TLE_NVDISASM, or put "
                            "the CUDA toolkit's on PATH")


def sass(cubin: bytes) -> str:
    """The SASS of a cubin, each run of instructions under the .tle file and line it came from (`//## File
    "softmax.tle", line 7`): both backends write line tables (Triton through ptxas -lineinfo, tileiras with
    --lineinfo), so the machine code reads against the kernel's source."""
    tool = find_nvdisasm()
    with tempfile.TemporaryDirectory(prefix="tle-sass-") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        out = subprocess.run([tool, "--print-line-info", "--print-code", path], capture_output=True, text=True,
                             timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"nvdisasm failed (exit {out.returncode}): {out.stderr.strip()[:2000]}")
    return _LINE_INFO.sub(_with_source, out.stdout)


_LINE_INFO = re.compile(r'^(\s*)//## File "([^"]+)", line (\d+)[^\n]*$', re.M)


def _with_source(m: "re.Match") -> str:
    """`//## File "k.tle", line 7` -> `//## k.tle:7    let m = max(t, axis=1)` (the line's text where the file is
    known: a path on disk, or source text the API registered)."""
    text = source_line(m.group(2), int(m.group(3)))
    return f"{m.group(1)}//## {m.group(2)}:{m.group(3)}" + (f"    {text.strip()}" if text and text.strip() else "")
