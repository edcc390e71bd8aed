"""`waferline emulate`: the JSON it prints, the plot it writes, the errors it explains."""

from __future__ import annotations

import json

import pytest

from waferline.cli.main import main

KEYS = {"model", "wafer", "mode", "tiles_used", "sram_bytes_used", "modeled_tok_s", "breakdown", "gpu"}


pytestmark = pytest.mark.usefixtures("single_thread")  # the command sets torch's threads; put them back after


def emulate(capsys, *argv: str) -> dict:
    assert main(["emulate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_numeric_mode_checks_tokens_against_torch_cpu(capsys):
    out = emulate(capsys, "--model", "tiny", "--wafer", "mini-32x32", "--context", "12", "--tokens", "3")
    assert out.keys() >= KEYS
    assert out["mode"] == "numeric" and out["tokens_match_reference"] is True
    assert out["tiles_used"] == 32 * 32 and out["sram_bytes_used"] > out["weight_bytes"] > 0
    assert set(out["breakdown"]) == {"compute", "sram", "fabric", "off_wafer"}
    assert sum(out["breakdown"].values()) == pytest.approx(1 / out["modeled_tok_s"])
    assert set(out["gpu"]) == {"h100", "h200"} and out["gpu"]["h200"] > out["gpu"]["h100"] > 0
    assert out["torch_cpu_tok_s"] > 0 and out["emulation_vs_torch_cpu"] > 0


def test_analytic_mode_projects_an_8b_model_on_wse3_and_plots_it(capsys, tmp_path):
    png = tmp_path / "wafer.png"
    out = emulate(
        capsys, "--model", "llama-3.1-8b", "--wafer", "wse-3", "--analytic", "--context", "512", "--plot", str(png)
    )
    assert out["mode"] == "analytic" and "tokens_match_reference" not in out
    assert out["tiles_used"] == out["tiles"] == 900_480
    assert out["dtype"] == "float16"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_70b_model_that_does_not_fit_is_one_clear_line(capsys):
    assert main(["emulate", "--model", "llama-3.1-70b", "--wafer", "wse-3", "--analytic", "--context", "64"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "tiles" in err and "spill" in err


def test_a_70b_model_spilling_to_off_wafer_memory(capsys):
    out = emulate(capsys, "--model", "llama-3.1-70b", "--wafer", "wse-3", "--analytic", "--context", "64", "--spill")
    assert out["spilled_bytes"] > 0 and out["breakdown"]["off_wafer"] > out["breakdown"]["fabric"]


def test_numeric_emulation_of_a_large_model_asks_for_analytic(capsys):
    assert main(["emulate", "--model", "llama-3.1-8b", "--wafer", "wse-3"]) == 2
    assert "--analytic" in capsys.readouterr().err
