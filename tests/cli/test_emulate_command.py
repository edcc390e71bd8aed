"""`waferline emulate`: the JSON it prints, the plot it writes, the errors it explains; its defaults on every
shipped model, preset and wafer; analytic mode from config.json alone; several wafers; the sweep; speculation."""

from __future__ import annotations

import json
import shutil

import pytest

from waferline.cli.emulate import NUMERIC_TILE_LIMIT
from waferline.cli.emulate_speculate import expected_tokens
from waferline.cli.main import main
from waferline.engine.checkpoint import MODELS_DIR
from waferline.engine.model import PRESETS
from waferline.hardware.wafer import PRESETS as WAFERS
from waferline.hardware.wafer import configs

KEYS = {"model", "wafer", "mode", "tiles_used", "sram_bytes_used", "modeled_tok_s", "breakdown", "gpu", "wafers"}
CATEGORIES = {"compute", "sram", "fabric", "off_wafer", "host_io", "inter_wafer"}
SHIPPED = sorted(p.name for p in MODELS_DIR.iterdir() if (p / "config.json").is_file())


pytestmark = pytest.mark.usefixtures("single_thread")  # the command sets torch's threads; put them back after


def emulate(capsys, *argv: str) -> dict:
    assert main(["emulate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_numeric_mode_checks_tokens_against_torch_cpu(capsys):
    out = emulate(capsys, "--model", "tiny", "--wafer", "mini-32x32", "--context", "12", "--tokens", "3")
    assert out.keys() >= KEYS
    assert out["mode"] == "numeric" and out["tokens_match_reference"] is True and out["wafers"] == 1
    assert out["tiles_used"] == 32 * 32 and out["sram_bytes_used"] > out["weight_bytes"] > 0
    assert set(out["breakdown"]) == CATEGORIES  # host I/O and inter-wafer terms added by issue 16
    assert out["breakdown"]["host_io"] > 0 and out["breakdown"]["inter_wafer"] == 0
    assert sum(out["breakdown"].values()) == pytest.approx(1 / out["modeled_tok_s"])
    assert set(out["gpu"]) == {"h100", "h200"} and out["gpu"]["h200"] > out["gpu"]["h100"] > 0
    assert out["torch_cpu_tok_s"] > 0 and out["emulation_vs_torch_cpu"] > 0


def test_analytic_mode_projects_an_8b_model_on_wse3_and_plots_it(capsys, tmp_path):
    png = tmp_path / "wafer.png"
    out = emulate(
        capsys, "--model", "llama-3.1-8b", "--wafer", "wse-3", "--analytic", "--context", "512", "--plot", str(png)
    )
    assert out["mode"] == "analytic" and "tokens_match_reference" not in out
    assert out["tiles_used"] == out["tiles"] == 900_480 and out["wafers"] == 1
    assert out["dtype"] == "float16"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_routing_over_the_colour_limit_runs_on_a_plan_that_fits(capsys):
    out = emulate(capsys, "--model", "llama-3.1-8b", "--wafer", "wse-3", "--context", "256")
    assert out["routes_unmerged"] > out["routes_available"] >= out["routes_per_tile"]
    assert out["route_merges"] and all(small < large for _, small, large in out["route_merges"])


def test_a_70b_model_on_one_wafer_is_one_clear_line(capsys):
    argv = ["emulate", "--model", "llama-3.1-70b", "--wafer", "wse-3", "--analytic", "--context", "64", "--wafers", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "tiles" in err and "spill" in err


def test_a_70b_model_is_projected_over_several_wafers(capsys):
    out = emulate(capsys, "--model", "llama-3.1-70b", "--wafer", "wse-3", "--context", "64")
    assert out["mode"] == "analytic" and out["model_source"] == "published config"
    assert out["wafers"] == 4  # 141 GB of 16-bit weights over 44 GB wafers
    assert [w["layers"] for w in out["per_wafer"]] == [20, 20, 20, 20]
    assert all(0.5 < w["occupancy"] <= 1.0 for w in out["per_wafer"])
    assert out["breakdown"]["inter_wafer"] > 0 and out["per_token"]["off_wafer_bytes"] == 0
    assert sum(w["seconds_per_token"] for w in out["per_wafer"]) == pytest.approx(out["seconds_per_token"])


def test_a_70b_model_spilling_to_off_wafer_memory(capsys):
    out = emulate(capsys, "--model", "llama-3.1-70b", "--wafer", "wse-3", "--analytic", "--context", "64", "--spill")
    assert out["wafers"] == 1
    assert out["spilled_bytes"] > 0 and out["breakdown"]["off_wafer"] > out["breakdown"]["fabric"]


def test_numeric_emulation_of_a_large_model_asks_for_analytic(capsys):
    assert main(["emulate", "--model", "llama-3.1-8b", "--wafer", "wse-3", "--numeric"]) == 2
    assert "--analytic" in capsys.readouterr().err


def test_analytic_mode_from_config_json_alone_counts_what_the_full_directory_does(capsys, tmp_path):
    shutil.copy(MODELS_DIR / SHIPPED[0] / "config.json", tmp_path / "config.json")
    argv = ("--wafer", "mini-32x32", "--context", "100", "--dtype", "float32")
    full = emulate(capsys, "--model", str(MODELS_DIR / SHIPPED[0]), "--analytic", *argv)
    alone = emulate(capsys, "--model", str(tmp_path), *argv)  # no weights: analytic without asking
    assert alone["mode"] == "analytic" and alone["model_source"] == "config only"
    for key in ("per_token", "breakdown", "by_op", "cycles_per_token", "sram_bytes_used", "weight_bytes", "tiles_used"):
        assert alone[key] == full[key], key
    assert main(["emulate", "--model", str(tmp_path), "--numeric"]) == 2
    assert "shapes only" in capsys.readouterr().err


def test_an_unsupported_shape_is_one_clear_line(capsys, tmp_path):
    cfg = json.loads((MODELS_DIR / SHIPPED[0] / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "hidden_act": "gelu"}))
    assert main(["emulate", "--model", str(tmp_path), "--analytic"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "hidden_act" in err


@pytest.mark.parametrize("model", [*SHIPPED, *PRESETS, *configs.names()])
def test_every_shipped_model_preset_and_published_config_runs_with_default_options(capsys, model):
    out = emulate(capsys, "--model", model)
    assert out["modeled_tok_s"] > 0 and out["context"] >= 1
    assert out["routes_per_tile"] <= out["routes_available"]


@pytest.mark.parametrize("wafer", sorted(WAFERS))
def test_every_wafer_preset_runs_with_default_options(capsys, wafer):
    out = emulate(capsys, "--wafer", wafer)
    assert out["wafer"] == wafer and out["modeled_tok_s"] > 0
    assert out["mode"] == ("numeric" if WAFERS[wafer].tiles <= NUMERIC_TILE_LIMIT else "analytic")
    if out["mode"] == "numeric":
        assert out["tokens_match_reference"] is True
    if wafer == "mini-8x8":  # the shipped model's embedding alone is larger than 64 tiles: it spills instead
        assert out["spill"] is True and out["spilled_bytes"] > 0


def test_the_default_context_fits_the_model(capsys):
    out = emulate(capsys, "--model", SHIPPED[0], "--wafer", "mini-32x32", "--tokens", "2")
    positions = json.loads((MODELS_DIR / SHIPPED[0] / "config.json").read_text())["max_position_embeddings"]
    assert out["context"] == min(1024, positions - 2)


def test_the_sweep_prints_a_table_and_writes_a_plot(capsys, tmp_path):
    png = tmp_path / "sweep.png"
    assert main(["emulate", "--model", "tiny", "--sweep", str(png), "--context", "64"]) == 0
    text = capsys.readouterr().out
    assert "grid side" in text and "all-reduce groups" in text and "context" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_speculation_costs_a_k_token_verification(capsys):
    out = emulate(capsys, "--model", "llama-3.1-8b", "--context", "256", "--speculate", "4", "--acceptance", "0.8")
    sp = out["speculation"]
    assert sp["tokens_per_step"] == pytest.approx(expected_tokens(4, 0.8))
    assert 1.0 < sp["verify_vs_decode"] < 4.0  # four tokens cost more than one, far less than four on the mesh
    assert sp["effective_tok_s"] == pytest.approx(sp["tokens_per_step"] / sp["verify_s"]) and sp["speedup"] > 1


def test_a_draft_models_steps_are_added_to_each_verification(capsys):
    """--draft: the draft's k one-token steps, each a plain projection of the draft on its own wafers (of
    --draft-wafer's preset when given), are added to the step; the draft-free figure is what it was."""
    base = ["--model", "llama-3.1-8b", "--context", "256", "--speculate", "4", "--acceptance", "0.8"]
    free = emulate(capsys, *base)["speculation"]
    sp = emulate(capsys, *base, "--draft", "llama-3.2-1b")["speculation"]
    alone = emulate(capsys, "--model", "llama-3.2-1b", "--context", "256")
    assert sp["draft"] == "llama-3.2-1b" and sp["draft_wafers"] == alone["wafers"] == 1
    assert sp["draft_s"] == pytest.approx(alone["seconds_per_token"])
    assert sp["verify_s"] == pytest.approx(free["verify_s"])
    assert sp["step_s"] == pytest.approx(sp["verify_s"] + 4 * sp["draft_s"])
    assert sp["effective_tok_s"] == pytest.approx(sp["tokens_per_step"] / sp["step_s"])
    assert sp["effective_tok_s"] < free["effective_tok_s"]
    region = emulate(capsys, *base, "--draft", "llama-3.2-1b", "--draft-wafer", "wse-3:240x240")["speculation"]
    on_region = emulate(capsys, "--model", "llama-3.2-1b", "--wafer", "wse-3:240x240", "--context", "256")
    assert region["draft_s"] == pytest.approx(on_region["seconds_per_token"]) != sp["draft_s"]
    assert region["draft_wafers"] == on_region["wafers"]


def test_draft_wafer_without_a_draft_is_refused(capsys):
    assert main(["emulate", "--model", "llama-3.1-8b", "--speculate", "2", "--draft-wafer", "wse-3:240x240"]) == 2
    assert "--draft-wafer goes with --draft" in capsys.readouterr().err


def test_expected_tokens_of_a_verification():
    assert expected_tokens(4, 0.0) == 1.0  # only the target's own token
    assert expected_tokens(4, 1.0) == 5.0
    assert expected_tokens(1, 0.5) == pytest.approx(1.5)
