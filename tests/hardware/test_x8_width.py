"""The X8 products' width (hardware/torch_backend/x8_width.py): chosen by CPU vendor unless WAFERLINE_X8_NARROW says,
set once when the library loads, and changing no result: narrow and wide make the same integers."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
import torch
from block_weights import blocks  # tests/support

from waferline.hardware.blocks import x8_kinds
from waferline.hardware.torch_backend import fused, fused_library, x8_width


@pytest.fixture
def lib() -> Any:
    lib = fused_library.library()
    if lib is None:
        pytest.skip("no C compiler here")
    return lib


def test_the_vendor_is_read_from_cpuinfo() -> None:
    amd = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
    assert x8_width.cpu_vendor(amd) == "AuthenticAMD"
    assert x8_width.cpu_vendor("processor\t: 0\nvendor_id\t: GenuineIntel\n") == "GenuineIntel"
    assert x8_width.cpu_vendor("processor\t: 0\nFeatures\t: fp asimd\n") == ""  # an arm64 cpuinfo: no vendor line


@pytest.mark.parametrize(
    ("env", "vendor", "narrow"),
    [
        ("auto", "AuthenticAMD", True),
        ("auto", "GenuineIntel", False),
        ("", "AuthenticAMD", True),
        ("auto", "", False),
        ("on", "GenuineIntel", True),
        ("1", "", True),
        ("off", "AuthenticAMD", False),
        ("No", "AuthenticAMD", False),
    ],
)
def test_the_environment_fixes_it_else_the_vendor_decides(env: str, vendor: str, narrow: bool) -> None:
    assert x8_width.wanted(env, vendor) is narrow


def test_an_unknown_value_is_logged_and_taken_as_auto(caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="waferline.hardware"):
        assert x8_width.wanted("sideways", "AuthenticAMD") is True
    assert "WAFERLINE_X8_NARROW='sideways' is not one of auto, on, off: choosing as for auto" in caplog.text


def test_the_library_is_set_as_the_environment_says(lib: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    before = lib.waferline_set_x8_narrow(-1)
    if before < 0:
        pytest.skip("this build has no 512-bit X8 product to choose against")
    try:
        for env, on in (("on", True), ("off", False)):
            monkeypatch.setenv(x8_width.ENV, env)
            assert x8_width.apply(lib) is on and x8_width.current(lib) is on
    finally:
        lib.waferline_set_x8_narrow(before)
    monkeypatch.delenv(x8_width.ENV)
    assert x8_width.current(lib) is x8_width.wanted()  # as library() set it at load


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q5_0", "Q8_0"])
def test_narrow_and_wide_give_the_same_outputs(kind: str, lib: Any) -> None:
    """1 to 6 vectors (whole tiles of 4 and the rest), 1 and 2 threads: bit for bit (Q5_0 is always wide; it is in
    the list to show the setting leaves it alone). tests/hardware/test_fused_blocks.py checks the product against
    the rows' as the library was set at load."""
    before = lib.waferline_set_x8_narrow(-1)
    built = x8_kinds(int(lib.waferline_blocks_x8()))
    if before < 0 or kind not in built:
        pytest.skip("this build has no 512-bit X8 product of this format")
    g = np.random.default_rng(11)
    w = blocks(kind, g.standard_normal((304, 576))).interleaved(built)
    assert w.segments == ((f"{kind}_X8", 304),)
    try:
        for n in (1, 2, 3, 4, 5, 6):
            x = torch.from_numpy(g.standard_normal((n, 576)).astype(np.float32))
            for threads in (1, 2):
                out = []
                for narrow in (0, 1):
                    lib.waferline_set_x8_narrow(narrow)
                    out.append(fused.blocks_linear(x, w, threads=threads))
                assert torch.equal(out[0], out[1]), (n, threads)
    finally:
        lib.waferline_set_x8_narrow(before)
