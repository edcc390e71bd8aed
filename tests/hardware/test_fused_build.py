"""The fused C step as built: its index layout read from the library itself, no warning under -Wall -Wextra, and a
run under AddressSanitizer and UndefinedBehaviorSanitizer (out-of-bounds reads, overflow, misalignment abort it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from required import missing  # tests/support

from waferline.hardware.torch_backend import fused_library

ROOT = Path(__file__).resolve().parents[2]


def test_the_c_tables_are_indexed_as_fused_py_fills_them(lib: Any) -> None:
    assert fused_library.c_layout(lib) == (fused_library.DIMS, fused_library.GLOBAL_PTRS, fused_library.LAYER_PTRS)


def test_a_table_out_of_step_with_the_c_enums_is_refused(lib: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    swapped = (fused_library.LAYER_PTRS[1], fused_library.LAYER_PTRS[0], *fused_library.LAYER_PTRS[2:])
    monkeypatch.setattr(fused_library, "LAYER_PTRS", swapped)
    with pytest.raises(RuntimeError, match="layer pointers are attn_norm, qkv_w"):
        fused_library.check_layout(lib)
    monkeypatch.setattr(fused_library, "LAYER_PTRS", (*fused_library.LAYER_PTRS, "extra"))
    with pytest.raises(RuntimeError, match="extra"):
        fused_library.check_layout(lib)


def test_the_sources_build_without_a_warning(lib: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fused_library, "CFLAGS", (*fused_library.CFLAGS, "-Werror"))
    assert {"-Wall", "-Wextra"} <= set(fused_library.CFLAGS)
    assert fused_library.compile_library(tmp_path).is_file()


SANITIZED = """
import sys, torch
sys.path.insert(0, "tests/support")
from waferline.hardware.torch_backend import fused, fused_library
fused_library.CFLAGS = (*[f for f in fused_library.CFLAGS if f != "-O3"], "-O1", "-g", "-fno-omit-frame-pointer",
                        "-fsanitize=address,undefined", "-fno-sanitize-recover=all")
from random_weights import scaled_state
from waferline.engine.hf import from_hf
from waferline.engine.model import ModelArgs, Transformer
from waferline.hardware.torch_backend import TorchDevice
assert fused_library.library() is not None, fused_library._library_error
args = ModelArgs(model_type="qwen3", vocab_size=70, dim=40, n_layers=1, n_heads=2, n_kv_heads=1,
                 intermediate_size=50, max_seq_len=64, head_dim=24)  # widths that exercise every tail
for weights, dtype in (("float", torch.float32), ("int8", torch.bfloat16)):
    model = Transformer(args, TorchDevice(dtype=dtype, weights=weights))
    model.load(from_hf(args, scaled_state(args, seed=3, weight_scale=1.0).items()))
    assert model.fused is not None
    kv = model.open_cache(40)
    rows = model.forward(list(range(1, 17)), kv, 0, last_only=False, like_steps=True)  # the 16-token step
    steps = [model.forward([t], kv, kv.length) for t in (3, 4, 5)]
    stats = model.row_stats(rows.float().contiguous())
    assert all(bool(torch.isfinite(x).all()) for x in (rows, *steps)) and len(stats[0]) == 16
import numpy as np
from gguf import GGMLQuantizationType, quants
from waferline.hardware.blocks import BlockWeight
g = np.random.default_rng(0)
def block(k):
    q = quants.quantize(g.standard_normal((17, 96)).astype(np.float32), GGMLQuantizationType[k])
    return BlockWeight(torch.from_numpy(q.reshape(-1).copy()), (17, 96), ((k, 17),))
parts = [block(k) for k in ("Q4_0", "Q4_1", "Q8_0")]
f32 = torch.randn(3, 96)
parts.append(BlockWeight(f32.view(torch.uint8).view(-1).clone(), (3, 96), (("F32", 3),)))
y = fused.blocks_linear(torch.randn(5, 96), BlockWeight.cat(parts), threads=2)  # GGUF blocks (fused_blocks.c)
assert y.shape == (5, 54) and bool(torch.isfinite(y).all())
print("clean")
"""


@pytest.mark.slow  # builds the C with sanitizers (-O1) and runs it: ~30-90 s here
def test_the_step_runs_clean_under_address_and_undefined_behaviour_sanitizers(lib: Any, tmp_path: Path) -> None:
    cc = shutil.which("gcc")
    if cc is None:
        missing("gcc is needed for the sanitizer runtimes")
    runtimes = [subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
                for name in ("libasan.so", "libubsan.so")]  # fmt: skip
    if not all(Path(r).is_file() for r in runtimes):
        missing(f"no sanitizer runtimes beside {cc}")
    env = os.environ | {
        "CC": cc, "XDG_CACHE_HOME": str(tmp_path), "LD_PRELOAD": ":".join(runtimes),
        "ASAN_OPTIONS": "detect_leaks=0",  # the interpreter's own allocations outlive it by design
        "UBSAN_OPTIONS": "print_stacktrace=1",
    }  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-c", SANITIZED], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0 and run.stdout.strip().endswith("clean"), run.stderr[-4000:]
