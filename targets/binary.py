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
import struct
from dataclasses import dataclass, field

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
