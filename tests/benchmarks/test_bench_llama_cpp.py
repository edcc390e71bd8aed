"""`waferline bench --llama-cpp`: the side-by-side report against the real llama-server (built by `make test`;
skipped without it), and a clear error when there is none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from llama_cpp_support import llama_cpp_bin  # tests/support (on sys.path: tests/conftest.py)

from waferline.benchmarks.llama_cpp import find_llama_server, load_file, repacking_works
from waferline.cli.main import main

pytestmark = pytest.mark.usefixtures("single_thread")  # the bench sets torch's threads; put them back after


def test_the_side_by_side_reports_both_formats_beside_llama_cpp(capsys: pytest.CaptureFixture[str]) -> None:
    folder = llama_cpp_bin()
    argv = ["bench", "--llama-cpp", "--llama-cpp-bin", str(folder), "--threads", "1", "--prompt-tokens", "8"]
    assert main([*argv, "--new-tokens", "6", "--repeats", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["new_tokens"] == 6 and list(report["threads"]) == ["1"]
    assert report["decode_path"] == {"int8": "fused", "float32": "fused"}
    assert report["kv_dtype"] == {"int8": "bfloat16", "float32": "float32"}  # as the loader opens each
    per = report["threads"]["1"]
    for way in ("waferline int8", "llama.cpp Q8_0", "waferline float32", "llama.cpp F32"):
        assert per[way]["decode_tok_s"] > 0 and per[way]["decode_tok_s_median"] <= per[way]["decode_tok_s"]
    ratio = per["waferline int8 / llama.cpp Q8_0"]["best"]
    assert ratio == pytest.approx(per["waferline int8"]["decode_tok_s"] / per["llama.cpp Q8_0"]["decode_tok_s"])
    assert "load average" in report["uptime_start"] and "load average" in report["uptime_end"]
    assert set(report["llama_repack"]) == {"f32", "q8_0"}  # how each llama-server ran: repacked or --no-repack
    assert all(isinstance(v, bool) for v in report["llama_repack"].values())


def test_a_llama_server_that_dies_loading_means_no_repacking(tmp_path: Path) -> None:
    """A server that exits while loading (as llama.cpp did repacking Q8_0 for AMX) sends the bench to --no-repack."""
    dies = tmp_path / "llama-server"
    dies.write_text("#!/bin/sh\necho 'repack: SIGSEGV' >&2\nexit 139\n")
    dies.chmod(0o755)
    assert not repacking_works(dies, tmp_path / "model.gguf", tmp_path / "check.log")
    assert "SIGSEGV" in (tmp_path / "check.log").read_text()


def test_without_llama_server_the_error_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="make llama-cpp"):
        find_llama_server(str(tmp_path))
    monkeypatch.setenv("WAFERLINE_LLAMA_CPP_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ValueError, match="--llama-cpp-bin"):
        find_llama_server(None)
    assert main(["bench", "--llama-cpp", "--llama-cpp-bin", str(tmp_path)]) == 2


def test_a_gguf_file_is_loaded_as_the_bench_and_the_server_load_it(tmp_path: Path) -> None:
    """The file's blocks kept and a bfloat16 KV cache, as engine/loader.py opens it for `waferline bench` and the
    server (before session 31 this side had load_model's float32 cache: half the decode at 1024 positions)."""
    from waferline.engine.checkpoint import DEFAULT_MODEL_DIR
    from waferline.engine.gguf.write import export_gguf
    from waferline.hardware.blocks import BlockWeight

    path = export_gguf(DEFAULT_MODEL_DIR, tmp_path / "mini-q4_0.gguf", "q4_0")
    loaded = load_file(path)
    assert loaded.model.device.dtype == torch.bfloat16
    from waferline.hardware.torch_backend import fused_library

    if fused_library.library() is not None:  # else the blocks are dequantised (no fused step to read them)
        assert isinstance(loaded.model.layers[0].qkv.payload, BlockWeight)
