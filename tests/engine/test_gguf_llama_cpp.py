"""The exported GGUF files run in the real llama.cpp (built by `make test`, tests/support/build-llama-cpp.sh) as they
run in waferline: the same tokens for the same text, the same greedy tokens for the same prompt, and K-quant files
that llama.cpp's own quantiser wrote load in waferline."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from llama_cpp_support import llama_cpp_bin, llama_server, post  # tests/support (on sys.path: tests/conftest.py)
from random_weights import scaled_state  # tests/support

from waferline.engine.checkpoint import DEFAULT_MODEL_DIR, LoadedModel, load_model
from waferline.engine.checkpoint_save import save_checkpoint
from waferline.engine.generate import generate
from waferline.engine.gguf.write import export_gguf
from waferline.engine.kvcache import Session
from waferline.engine.model import ModelArgs

PREFIX = 'def scale(values, factor):\n    """Multiply each value by factor."""\n    return '
SUFFIX = "\n\n\ndef mean(values):\n    return sum(values) / len(values)\n"
TEXT = "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y  # café 😀\r\n\t\treturn None\n"


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    llama_cpp_bin()  # skip early, before exporting anything, when llama.cpp is not built
    return tmp_path_factory.mktemp("gguf")


def waferline_greedy(lm: LoadedModel, ids: list[int], n: int) -> list[int]:
    out = generate(Session(lm.model), ids, max_new_tokens=n, stop_token_ids=lm.special.stop_ids).tokens
    return [t for t in out if t not in lm.special.stop_ids]


def llama_greedy(url: str, ids: list[int], n: int) -> list[int]:
    body = {"prompt": ids, "n_predict": n, "temperature": 0, "top_k": 1, "samplers": ["top_k"],
            "return_tokens": True, "cache_prompt": False}  # fmt: skip
    return list(post(url + "/completion", body)["tokens"])


@pytest.fixture(scope="module")
def shipped_f32(gguf_dir: Path) -> Iterator[tuple[Path, str]]:
    path = export_gguf(DEFAULT_MODEL_DIR, gguf_dir / "waferline-mini-f32.gguf", "f32")
    with llama_server(path) as url:
        yield path, url


def test_llama_cpp_tokenizes_as_waferline(shipped_f32: tuple[Path, str]) -> None:
    _, url = shipped_f32
    lm = load_model(DEFAULT_MODEL_DIR)
    for text in (TEXT, PREFIX + SUFFIX, "x = 1234567 + 0.5e-3\n"):
        assert post(url + "/tokenize", {"content": text})["tokens"] == lm.tokenizer.encode(text)


def test_llama_cpp_greedy_tokens_equal_waferline(shipped_f32: tuple[Path, str]) -> None:
    _, url = shipped_f32
    lm = load_model(DEFAULT_MODEL_DIR)
    assert lm.fim is not None
    for prefix, suffix in ((PREFIX, SUFFIX), ("import os\n\n\ndef main():\n    ", "")):
        ids = lm.fim.build(prefix, suffix)
        mine = waferline_greedy(lm, ids, 32)
        assert mine and llama_greedy(url, ids, 32)[: len(mine)] == mine


def test_a_q8_0_file_decodes_alike_in_llama_cpp_and_waferline(gguf_dir: Path) -> None:
    """llama.cpp quantises activations to 8 bits as well, waferline computes in float32 from the same Q8_0 weights:
    greedy tokens agree for a stretch (19 and 24 of 32 here), then may part."""
    path = export_gguf(DEFAULT_MODEL_DIR, gguf_dir / "waferline-mini-q8_0.gguf", "q8_0")
    lm = load_model(path)
    assert lm.fim is not None
    with llama_server(path) as url:
        for prefix, suffix in ((PREFIX, SUFFIX), ("class Point:\n    def __init__(self, x, y):\n        ", "\n")):
            ids = lm.fim.build(prefix, suffix)
            mine, theirs = waferline_greedy(lm, ids, 32), llama_greedy(url, ids, 32)
            assert len(mine) >= 8 and mine[:8] == theirs[:8]


def test_llama_cpp_infill_uses_the_fim_tokens_of_the_file(shipped_f32: tuple[Path, str]) -> None:
    """llama-server builds its /infill prompt from the FIM ids in the metadata; its answer is waferline's (PSM)."""
    _, url = shipped_f32
    lm = load_model(DEFAULT_MODEL_DIR)
    assert lm.fim is not None
    mine = waferline_greedy(lm, lm.fim.build(PREFIX, SUFFIX, order="psm"), 16)
    assert mine
    body = {"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 16, "temperature": 0, "top_k": 1,
            "samplers": ["top_k"], "return_tokens": True}  # fmt: skip
    assert post(url + "/infill", body)["tokens"][: len(mine)] == mine


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_llama_and_qwen3_files_run_the_same_in_llama_cpp(gguf_dir: Path, model_type: str) -> None:
    """Checks the q/k row order llama.cpp expects for the llama architecture (Qwen2 and Qwen3 files keep Hugging
    Face's), and Qwen3's per-head q/k norms under the names llama.cpp reads (a head_dim wider than dim / heads)."""
    head_dim = 64 if model_type == "qwen3" else 0
    args = ModelArgs(model_type=model_type, vocab_size=8192, dim=128, n_layers=2, n_heads=4, n_kv_heads=2,
                     intermediate_size=256, max_seq_len=1024, norm_eps=1e-5, rope_theta=10000.0,
                     head_dim=head_dim)  # fmt: skip
    state = scaled_state(args, seed=3)
    src = save_checkpoint(
        gguf_dir / f"{model_type}-src", args, state,
        tokenizer_json=(DEFAULT_MODEL_DIR / "tokenizer.json").read_text(encoding="utf-8"), fim_template="waferline",
    )  # fmt: skip
    path = export_gguf(src, gguf_dir / f"{model_type}-f32.gguf", "f32")
    lm = load_model(src)
    ids = lm.tokenizer.encode(TEXT)
    with llama_server(path) as url:
        theirs = llama_greedy(url, ids, 16)
    assert waferline_greedy(lm, ids, 16) == theirs[:16]


def test_k_quant_files_written_by_llama_cpp_load_in_waferline(shipped_f32: tuple[Path, str], gguf_dir: Path) -> None:
    f32, _ = shipped_f32
    reference = load_model(DEFAULT_MODEL_DIR)
    ids = torch.tensor(reference.tokenizer.encode(TEXT))
    want = reference.model.forward(ids, reference.model.open_cache(), 0, last_only=False).float()
    for kind in ("Q4_K_M", "Q6_K", "Q4_0"):
        out = gguf_dir / f"waferline-mini-{kind}.gguf"
        quantize = [str(llama_cpp_bin() / "llama-quantize"), str(f32), str(out), kind]
        subprocess.run(quantize, check=True, capture_output=True, timeout=120)
        lm = load_model(out)
        got = lm.model.forward(ids, lm.model.open_cache(), 0, last_only=False).float()
        similarity = torch.nn.functional.cosine_similarity(got.flatten(), want.flatten(), dim=0)
        assert similarity > 0.95, (kind, float(similarity))
