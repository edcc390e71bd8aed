"""The fused step as other CPUs build it. The library is compiled with -march=native, so on its own a test machine
only ever checks its own code paths; a user on a laptop with AVX2 alone (most AMD Zen and Intel client CPUs), with
AVX-VNNI and no AVX-512 (Intel's since Alder Lake), or with neither gets others. Each is built here through `$CC`
(a wrapper that adds its -march last, so it wins; the library honours $CC) into a cache of its own, and the fused
step's tests run on it in a second pytest: warnings as errors, the C step against the per-op step, the block
products against llama.cpp's arithmetic written out in numpy. AVX-VNNI, which this machine may lack, is emulated
exactly with AVX2 (tests/support/avxvnni_emulated.h) so that its code paths run anyway."""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from waferline.hardware.torch_backend.fused_library import INT8_AVX2

ROOT = Path(__file__).resolve().parents[2]
EMULATED_VNNI = ROOT / "tests" / "support" / "avxvnni_emulated.h"
V3 = {"avx2", "fma", "f16c", "bmi1", "bmi2", "movbe"}  # what -march=x86-64-v3 code may execute (and AVX's, SSE's)
# name: (flags added last, the CPU flags it needs, waferline_blocks_x8(), waferline_int8_features())
VNNI_FLAGS = ["-march=x86-64-v3", "-D__AVXVNNI__=1", "-include", str(EMULATED_VNNI)]
BUILDS = {
    "avx2": (["-march=x86-64-v3"], V3, 1, INT8_AVX2),
    "avx2-avxvnni-emulated": (VNNI_FLAGS, V3, 1, INT8_AVX2),
    "scalar": (["-march=x86-64"], set(), 0, 0),
}
TESTS = [
    "tests/hardware/test_fused_build.py::test_the_sources_build_without_a_warning",
    "tests/hardware/test_fused.py",
    "tests/hardware/test_fused_blocks.py",
    "tests/hardware/test_fused_packed.py",
    "tests/hardware/test_prefetch.py",
]


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BUILDS))
def test_the_fused_steps_tests_pass_as_another_cpu_builds_it(name: str, tmp_path: Path) -> None:
    flags, needs, blocks_x8, int8 = BUILDS[name]
    gcc = shutil.which("gcc")
    if platform.machine() not in ("x86_64", "AMD64") or gcc is None:
        pytest.skip("these builds are x86-64 ones, made with gcc")
    if needs - cpu_flags():
        pytest.skip(f"this CPU cannot run the {name} build (it lacks {sorted(needs - cpu_flags())})")
    wrapper = tmp_path / "cc"
    wrapper.write_text(f'#!/bin/sh\nexec {gcc} "$@" {" ".join(flags)}\n')
    wrapper.chmod(0o755)
    cache = tmp_path / "cache"
    env = {**os.environ, "CC": str(wrapper), "XDG_CACHE_HOME": str(cache)}
    env.pop("WAFERLINE_FUSED", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow", *TESTS],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, f"the {name} build's tests failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    assert " passed" in proc.stdout and "error" not in proc.stdout.splitlines()[-1]
    # the library those tests ran on is the build asked for (its products as the flags choose them)
    (built,) = [p for p in (cache / "waferline" / "kernels").glob("fused_step-*.so")]
    lib = ctypes.CDLL(str(built))
    lib.waferline_blocks_x8.restype = lib.waferline_int8_features.restype = ctypes.c_int64
    assert (lib.waferline_blocks_x8(), lib.waferline_int8_features()) == (blocks_x8, int8)
    emulated = hasattr(lib, "wl_avxvnni_emulated")
    assert emulated == ("-D__AVXVNNI__=1" in flags)
