"""GGUF tokenizers from the pre-tokenizer a file names (engine/gguf/pretokenizers.py): token for token what
llama.cpp's tokenizer gives (llama-server's /tokenize, built by `make test`) for every distinct row of the table, on
a text of code mixed with accents, CJK, emoji, digit runs, contractions, tabs and CRLF; and the settings and errors
that come with the name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tokenizers
from gguf_rewrite import REMOVE, rewrite_gguf  # tests/support (on sys.path: tests/conftest.py)
from llama_cpp_support import llama_cpp_bin, llama_server, post
from random_weights import scaled_state

from waferline.engine.checkpoint import DEFAULT_MODEL_DIR, CheckpointError, load_model
from waferline.engine.checkpoint_save import save_checkpoint
from waferline.engine.gguf.pretokenizers import PRE_TOKENIZERS, REPRESENTATIVES
from waferline.engine.gguf.write import export_gguf
from waferline.engine.model import ModelArgs

MIXED = (
    "def naïve_sum(xs: list[int]) -> int:\n"
    "    # Σ über alle Werte — 12345 + 0.5e-3, x=1_000_000;y='a'*3\n"
    "\tréturn sum(xs)  # don't, I'LL, we've, THEY'RE\r\n\n"
    '    s = "日本語のテキスト 中文 한국어 😀👍🏽 Привет мир"\n'
    "   \n  \t  \n"
    "class CamelCase_HTTPServer(Base):  pass   # 2024-01-31T12:00:00Z $PATH ~/x |y| ^z `q`\n"
    "if(a<=b&&c!=d){return a?.b??c;}\n\n\n    "
)


@pytest.fixture(scope="module")
def base_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random Llama model with the shipped tokenizer's vocabulary and merges, as F32 GGUF."""
    folder = tmp_path_factory.mktemp("pre")
    args = ModelArgs(model_type="llama", vocab_size=8192, dim=64, n_layers=1, n_heads=4, n_kv_heads=2,
                     intermediate_size=128, max_seq_len=1024, norm_eps=1e-5)  # fmt: skip
    tokenizer = (DEFAULT_MODEL_DIR / "tokenizer.json").read_text(encoding="utf-8")
    src = save_checkpoint(folder / "src", args, scaled_state(args, seed=2), tokenizer_json=tokenizer)
    return export_gguf(src, folder / "base.gguf", "f32")


def with_pre(base: Path, name: str, **changes: object) -> Path:
    """The base file naming pre-tokenizer `name`, with a BOS token and no add_bos_token (llama.cpp's default for the
    name then decides), unless `changes` say otherwise."""
    changes = {"tokenizer.ggml.pre": name, "tokenizer.ggml.bos_token_id": 0, **changes}
    changes.setdefault("tokenizer.ggml.add_bos_token", REMOVE)
    return rewrite_gguf(base, base.with_name(f"pre-{name}-{len(changes)}.gguf"), None, changes)


@pytest.mark.parametrize("name", REPRESENTATIVES)
def test_tokens_equal_llama_cpp_for_every_row(base_gguf: Path, name: str) -> None:
    llama_cpp_bin()  # skipped (with the command that builds it) when llama.cpp is not built
    path = with_pre(base_gguf, name)
    lm = load_model(path)
    with llama_server(path) as url:
        for text in (MIXED, MIXED.upper(), " leading space", "x" * 3 + "1234567890" * 3):
            theirs = post(url + "/tokenize", {"content": text, "parse_special": False, "add_special": False})
            assert lm.tokenizer.encode(text) == theirs["tokens"], (name, text[:30])
        # the BOS rule: llama.cpp's default for the name, as the file does not say (with_pre removes add_bos_token)
        bos = post(url + "/tokenize", {"content": "x", "add_special": True})["tokens"]
        assert lm.special.add_bos == (len(bos) == 2)


def pieces(name: str, text: str) -> tuple[str, ...]:
    document = {"version": "1.0", "pre_tokenizer": PRE_TOKENIZERS[name].document(), "added_tokens": [],
                "model": {"type": "BPE", "vocab": {}, "merges": []}}  # fmt: skip
    pre = tokenizers.Tokenizer.from_str(json.dumps(document)).pre_tokenizer
    assert pre is not None
    return tuple(piece for piece, _ in pre.pre_tokenize_str(text))


def test_the_rows_split_differently(base_gguf: Path) -> None:
    """The parity test above cannot pass by accident: the rows split the text differently (so one that used the
    wrong row would fail), except Llama 3's and dbrx's, which differ in ignore_merges instead."""
    splits = {name: pieces(name, MIXED) for name in REPRESENTATIVES}
    assert len(set(splits.values())) == len(REPRESENTATIVES) - 1
    assert splits["llama-bpe"] == splits["dbrx"]
    assert PRE_TOKENIZERS["llama-bpe"].ignore_merges and not PRE_TOKENIZERS["dbrx"].ignore_merges
    assert PRE_TOKENIZERS["smollm"] is PRE_TOKENIZERS["starcoder"]
    assert pieces("smollm", "x = 12") == ("x", "Ġ=", "Ġ", "1", "2")  # each digit its own piece (Ġ: a space)


def test_llama3s_bos_default_and_the_files_own_say(base_gguf: Path) -> None:
    assert load_model(with_pre(base_gguf, "llama-bpe")).special.add_bos
    said = with_pre(base_gguf, "llama-bpe", **{"tokenizer.ggml.add_bos_token": False})
    assert not load_model(said).special.add_bos
    assert not load_model(with_pre(base_gguf, "qwen2")).special.add_bos


def test_an_unknown_pre_tokenizer_is_refused_with_the_known_ones(base_gguf: Path) -> None:
    with pytest.raises(CheckpointError, match=r"pre-tokenizer 'kimi-k2' is not known.*smollm.*starcoder"):
        load_model(with_pre(base_gguf, "kimi-k2"))
