"""benchmarks/nes_declared_check.py: renames each followed declaration, follows its chain, counts what compiles
(the C compiler the fused steps are built with checks it here)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from waferline.benchmarks.nes_declared_check import check_file

C = "#define SHOW() v\nint f(int w) {\n  int t = w;\n  return t + w;\n}\n\nint g(int v) {\n  return SHOW() + v;\n}\n"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_renames_are_compiled_and_refusals_counted_silent(tmp_path: Path) -> None:
    path = tmp_path / "a.c"
    path.write_text(C)
    ok, bad, silent = check_file(path, "c", "cc -fsyntax-only {file}", 40)
    assert (ok, bad, silent) == (2, [], 1), "w and t renamed with their uses; v, read by a macro, silent"
    ok, bad, silent = check_file(path, "c", "false", 40)
    assert ok == 0 and len(bad) == 2 and bad[0].endswith(":2: w") and silent == 1
