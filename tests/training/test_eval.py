import math
from pathlib import Path

import pytest

from waferline.engine.checkpoint_save import save_checkpoint
from waferline.engine.hf import init_random
from waferline.engine.model import ModelArgs
from waferline.engine.tokenizer import Tokenizer
from waferline.training.baselines import NGramModel, copy_similar_line
from waferline.training.cases import edit_similarity
from waferline.training.evaluate import EvalConfig, evaluate

SCORE_KEYS = {"exact_match", "edit_sim"}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> Path:
    args = ModelArgs(
        model_type="qwen2", vocab_size=512, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=128,
        max_seq_len=256, qkv_bias=True, tie_embeddings=True,
    )  # fmt: skip
    out = tmp_path_factory.mktemp("models") / "tiny"
    return save_checkpoint(out, args, init_random(args), tokenizer_json=tokenizer.to_str(), fim_template="waferline")


def test_eval_on_a_handful_of_files_produces_every_key(tiny_model: Path, corpus_dir: Path) -> None:
    cfg = EvalConfig(
        model=tiny_model, corpus_root=corpus_dir, held_out_percent=50, line_cases=4, fim_cases=3, line_max_new=6,
        fim_max_new=6, heal=True,
    )  # fmt: skip
    r = evaluate(cfg, examples=1)
    for key in ("model", "params", "held_out_files", "held_out_tokens", "chars_per_token", "decode_tok_s", "seconds"):
        assert key in r, key
    assert set(r["perplexity"]) == set(r["bits_per_char"]) == {"model", "ngram"}
    assert r["perplexity"]["model"] > 1 and r["bits_per_char"]["ngram"] > 0
    assert r["line"]["cases"] == 4 and r["fim"]["cases"] == 3
    for who in ("model_psm", "model_spm", "model_spm_healed", "ngram", "copy_line"):
        assert set(r["line"][who]) >= SCORE_KEYS
        assert SCORE_KEYS | {"parse_rate", "by_kind"} <= set(r["fim"][who])
        assert set(r["fim"][who]["by_kind"]) == {"block", "expression", "arguments"}
    assert {e["task"] for e in r["examples"]} == {"line", "fim"}
    # a fixed seed gives the same cases and the same figures
    again = evaluate(cfg)
    assert again["line"] == r["line"] and again["fim"] == r["fim"]


def test_edit_similarity() -> None:
    assert edit_similarity("abc", "abc") == 1.0
    assert edit_similarity("", "abc") == 0.0
    assert edit_similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)


def test_copy_line_baseline_copies_the_most_similar_earlier_line() -> None:
    prefix = "self.x = x\nself.name = name\nprint(x)\nself.na"
    assert copy_similar_line(prefix) == "me = name"
    assert copy_similar_line("no earlier line") == ""


def test_ngram_is_normalised_and_predicts_frequent_continuations() -> None:
    model = NGramModel([[5, 6, 7, 5, 6, 7, 5, 6, 8]], vocab_size=10, n=3)
    assert model.next_token([5, 6]) == 7
    total = sum(math.exp(model.log_probs([5, 6, w])[-1]) for w in range(10))
    assert total == pytest.approx(1.0)
    assert model.complete([5], 4, lambda out: len(out) >= 3) == [6, 7, 5]


def test_ngram_model_of_sequences_shorter_than_its_order() -> None:
    from waferline.training.baselines import NGramModel

    model = NGramModel([[1, 2], [3]], vocab_size=8, n=4)  # no 3- or 4-gram at all
    assert model.complete([1], 3, lambda out: False) and len(model.log_probs([1, 2, 3])) == 2
