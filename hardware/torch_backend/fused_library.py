"""The fused step's C library: fused_step.c and the other fused_*.c files (fused.h lists them) compiled once per
machine, loaded with ctypes, and checked against the layout fused.py fills (`DIMS`, `GLOBAL_PTRS`, `LAYER_PTRS`);
with the library's entry points that take no model (the read probe, the worker pool's statistics).

The C files are compiled with the system C compiler (`$CC`, else `cc`/`gcc`) into the user cache directory
(`$XDG_CACHE_HOME/waferline/kernels`, default ~/.cache), keyed by the sources, the flags and this CPU, in a few
seconds the first time. Without a compiler, or with `WAFERLINE_FUSED=0`, the backend keeps the per-op path and says
so in the log once; nothing else changes.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from waferline.hardware.torch_backend import prefetch, x8_width

log = logging.getLogger("waferline.hardware")

SOURCES = tuple(
    Path(__file__).with_name(name)
    for name in (
        "fused_step.c",
        "fused_attention.c",
        "fused_linear.c",
        "fused_packed.c",
        "fused_block_formats.c",
        "fused_blocks.c",
        "fused_blocks_matrix.c",
        "fused_kquants_x8.c",
        "fused_blocks_x8.c",
        "fused_kquants.c",
        "fused_math.c",
        "fused_pool.c",
    )
)
HEADERS = tuple(
    Path(__file__).with_name(name) for name in ("fused.h", "fused_attention_simd.h", "fused_attention_direct.h")
)
# -ffp-contract=off: no compiler-made fused multiply-adds, so that the vector and scalar forms of each sum round alike;
# -Wall -Wextra: the sources build without a warning (tests/hardware/test_fused_build.py builds them with -Werror)
CFLAGS = (
    "-O3", "-march=native", "-fno-math-errno", "-fopenmp-simd", "-ffp-contract=off", "-std=c11", "-shared", "-fPIC",
    "-pthread", "-Wall", "-Wextra",
)  # fmt: skip
# The order of `dims` and of the pointer table. fused_step.c makes its enums D_*, P_* and L_* from lists of the same
# names, which it reports (waferline_layout): `library()` refuses a library whose lists are not these.
DIMS = ("dim", "layers", "heads", "kv_heads", "head_dim", "inter", "vocab", "max_tokens", "wfmt", "kvfmt", "embfmt")
GLOBAL_PTRS = ("embed", "norm", "head_w", "head_s", "head_r", "cos", "sin", "scratch")
LAYER_PTRS = (
    "attn_norm", "qkv_w", "qkv_s", "qkv_r", "qkv_b", "o_w", "o_s", "o_r", "mlp_norm", "gu_w", "gu_s", "gu_r", "down_w",
    "down_s", "down_r", "q_norm", "k_norm",
)  # fmt: skip
W_F32, W_INT8, W_INT8_PACKED, W_BLOCKS = 0, 1, 2, 3
INT8_VNNI, INT8_AVX2 = 1, 2  # waferline_int8_features() bits (fused.h)
EMB_BLOCKS = 16  # embfmt of an embedding in GGUF blocks: this plus the format's ggml type number (fused.h)
KV_F32, KV_BF16 = 0, 1

_library: ctypes.CDLL | None = None
_library_error: str | None = None


def disabled_by_env() -> bool:
    return os.environ.get("WAFERLINE_FUSED", "1").strip().lower() in ("0", "false", "no", "off")


def _cpu_key() -> str:
    """What -march=native depends on: the machine and its CPU flags (a shared home on another CPU gets its own)."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = line
                break
    except OSError:
        pass
    return platform.machine() + flags


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "waferline" / "kernels"


def compile_library(out_dir: Path | None = None) -> Path:
    """Compile the C sources (once: the result is cached by content) and return the shared library's path.

    Raises RuntimeError with the compiler's message when there is no compiler or it fails.
    """
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler found (set CC, or install gcc)")
    source = b"".join(path.read_bytes() for path in (*SOURCES, *HEADERS))
    key = hashlib.sha256(source + " ".join(CFLAGS).encode() + compiler.encode() + _cpu_key().encode()).hexdigest()
    out_dir = out_dir or cache_dir()
    target = out_dir / f"fused_step-{key[:16]}.so"
    if target.is_file():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".so.tmp")
    os.close(fd)
    try:
        proc = subprocess.run(
            [compiler, *CFLAGS, "-o", tmp, *map(str, SOURCES), "-lm"], capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{compiler} failed on {SOURCES[0].name}: {proc.stderr.strip()[-2000:]}")
        os.replace(tmp, target)  # atomic: another process compiling at once gets the same file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def c_layout(lib: ctypes.CDLL) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The C side's dims, global pointers and per-layer pointers, in index order, lower case like DIMS."""
    lib.waferline_layout.restype = ctypes.c_char_p
    lib.waferline_layout.argtypes = [ctypes.c_int64, ctypes.c_int64]

    def table(which: int) -> tuple[str, ...]:
        names: list[str] = []
        while (name := lib.waferline_layout(which, len(names))) is not None:
            names.append(name.decode().lower())
        return tuple(names)

    return table(0), table(1), table(2)


def check_layout(lib: ctypes.CDLL) -> None:
    """RuntimeError unless the library indexes `dims` and the pointer table as DIMS, GLOBAL_PTRS and LAYER_PTRS say."""
    for side, python, c in zip(("dims", "global pointers", "layer pointers"), (DIMS, GLOBAL_PTRS, LAYER_PTRS),
                               c_layout(lib), strict=True):  # fmt: skip
        if python != c:
            raise RuntimeError(f"fused_step.c's {side} are {', '.join(c)}; fused_library.py's are {', '.join(python)}")


def library() -> ctypes.CDLL | None:
    """The loaded kernel library, or None (with the reason logged once) when it cannot be built here."""
    global _library, _library_error
    if _library is not None or _library_error is not None:
        return _library
    try:
        lib = ctypes.CDLL(str(compile_library()))
        check_layout(lib)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        _library_error = str(e)
        log.warning("fused decode step unavailable, using per-op torch calls: %s", e)
        return None
    vp, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.waferline_step.restype = ctypes.c_int
    lib.waferline_step.argtypes = [vp, vp, vp, vp, i64, i64, i64, vp, i64]  # dims, eps, ptrs, kv, max_t, token, pos,
    lib.waferline_steps.restype = ctypes.c_int  # `steps` takes tokens, n where `step` takes token, and n_logits
    lib.waferline_steps.argtypes = [vp, vp, vp, vp, i64, vp, i64, i64, vp, i64, i64]
    lib.waferline_read.restype = ctypes.c_uint64
    lib.waferline_read.argtypes = [vp, vp, i64, i64]  # pointers, byte counts, how many, threads
    lib.waferline_pool_stats.argtypes = [vp]
    lib.waferline_pool_stall_probe.restype = i64
    lib.waferline_pool_stall_probe.argtypes = [i64, i64]  # the caller's chunk busy, a worker's asleep (µs)
    lib.waferline_row_stats.restype = ctypes.c_int64  # rows done
    lib.waferline_row_stats.argtypes = [vp, i64, i64, vp, vp, vp, vp, i64]  # rows, n, vocab; out: argmax, max,
    # logsumexp; the draft the rows verify and its length (0: every row)
    lib.waferline_blocks_linear.restype = ctypes.c_int  # y, x, n, w, segment table, n_in, n_out, scratch, threads
    lib.waferline_blocks_linear.argtypes = [vp, vp, i64, vp, vp, i64, i64, vp, i64]
    lib.waferline_blocks_rows.restype = ctypes.c_int  # out, w, kind, n_in, n_rows, rows, n
    lib.waferline_blocks_rows.argtypes = [vp, vp, i64, i64, i64, vp, i64]
    lib.wl_blocks_scratch_bytes.restype = ctypes.c_int64
    lib.wl_blocks_scratch_bytes.argtypes = [i64]
    lib.waferline_step_max_tokens.restype = ctypes.c_int64
    lib.waferline_scratch_floats.restype = ctypes.c_int64
    lib.waferline_scratch_floats.argtypes = [ctypes.c_void_p]
    lib.waferline_int8_features.restype = ctypes.c_int64
    lib.waferline_set_prefetch.restype = i64
    lib.waferline_set_prefetch.argtypes = [i64]  # 1 on, 0 off, -1 as it is; the setting before
    lib.waferline_set_kv_prefetch.restype = i64
    lib.waferline_set_kv_prefetch.argtypes = [i64]  # the same, for the KV cache's rows (fused_step.c)
    lib.waferline_set_x8_narrow.restype = i64
    lib.waferline_set_x8_narrow.argtypes = [i64]  # the same, for the X8 products' 256-bit path (-1: none built)
    lib.waferline_blocks_x8.restype = ctypes.c_int64
    # settings of the whole process, made once here: the KV cache's rows asked for ahead, the X8 products' width
    prefetch.apply_kv_from_env(lib)
    x8_width.apply(lib)
    _library = lib
    return lib


def read_seconds(tensors: Sequence[Tensor], *, threads: int, repeats: int = 5) -> float | None:
    """The best time of `repeats` passes that each read every byte of `tensors` once (after one pass that warms the
    caches), with wide loads on `threads` threads: how fast this machine reads that working set. None without the
    compiled library."""
    import time

    lib = library()
    if lib is None:
        return None
    assert all(t.device.type == "cpu" and t.is_contiguous() for t in tensors), "the read probe reads CPU tensors"
    ptrs = (ctypes.c_void_p * len(tensors))(*(t.data_ptr() for t in tensors))
    sizes = torch.tensor([t.numel() * t.element_size() for t in tensors], dtype=torch.int64)
    best = float("inf")
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        lib.waferline_read(ptrs, sizes.data_ptr(), len(tensors), threads)
        if i:
            best = min(best, time.perf_counter() - t0)
    return best


def pool_stats() -> dict[str, int]:
    """What the worker threads did since the last call (fused_pool.c): products split between threads, products run
    by the caller alone while it backs off after a stall, and stalls (a wait for a preempted worker)."""
    lib = library()
    if lib is None:
        return {"split": 0, "alone": 0, "stalls": 0}
    out = torch.zeros(4, dtype=torch.int64)
    lib.waferline_pool_stats(out.data_ptr())
    return {"split": int(out[0]), "alone": int(out[1]), "stalls": int(out[2])}
