"""Token healing: which prompts are backed up, what the first token may be, and what text generate() hands back."""

from __future__ import annotations

import pytest
import torch
from tokenizers import SentencePieceBPETokenizer

from waferline.engine.checkpoint import DEFAULT_MODEL_DIR
from waferline.engine.generate import _TextTracker, generate
from waferline.engine.healing import Healing, TokenHealer
from waferline.engine.hf import from_hf, init_random
from waferline.engine.kvcache import Session
from waferline.engine.model import ModelArgs, Transformer
from waferline.engine.tokenizer import Tokenizer
from waferline.hardware import open_device


@pytest.fixture(scope="module")
def shipped_tokenizer() -> Tokenizer:
    return Tokenizer.from_file(DEFAULT_MODEL_DIR / "tokenizer.json")


@pytest.fixture(scope="module")
def healer(bpe_tokenizer: Tokenizer) -> TokenHealer:
    return TokenHealer(bpe_tokenizer)


def test_a_cut_word_is_backed_up_and_every_allowed_token_extends_it(healer: TokenHealer) -> None:
    tk = healer.tokenizer
    ids = tk.encode("def add(a, b):\n    ret")
    healing = healer.heal(ids)
    assert healing is not None
    assert healing.prompt == ids[:-1] and healing.text == tk.decode(ids[-1:])
    allowed = healing.allowed.tolist()
    assert ids[-1] in allowed and len(allowed) > 1  # the original token stays possible
    assert all(tk.decode([i]).startswith(healing.text) for i in allowed)  # a word is not re-spelt from a shorter start
    longer = [i for i, text in ((i, tk.decode([i])) for i in range(tk.vocab_size)) if text.startswith(healing.text)]
    assert sorted(allowed) == sorted(i for i in longer if i not in tk.special_ids)  # and no token is missed


def test_a_run_of_whitespace_may_also_begin_with_a_shorter_run(healer: TokenHealer) -> None:
    tk = healer.tokenizer
    run = " " * 5
    spell = [
        i
        for i, t in ((i, tk.decode([i])) for i in range(tk.vocab_size) if i not in tk.special_ids)
        if t.startswith(run) or (t and run.startswith(t) and t != run)
    ]
    assert sorted(healer.allowed(run)) == sorted(spell)
    assert any(len(tk.decode([i])) < len(run) for i in healer.allowed(run))
    assert all(tk.decode([i]).startswith("\n  ") for i in healer.allowed("\n  "))  # a line end is not split off
    assert all(tk.decode([i]).startswith("\n\n") for i in healer.allowed("\n\n"))


def test_indentation_is_respelt_as_training_spelt_it(shipped_tokenizer: Tokenizer) -> None:
    """`    if` is three spaces and ` if` to the shipped tokenizer; a prompt that ends in four spaces is backed up and
    may go on with the three spaces, then ` if`."""
    healer = TokenHealer(shipped_tokenizer)
    tk = shipped_tokenizer
    line = tk.encode("def f(x):\n    if x:\n")
    at = [tk.decode([i]) for i in line].index("   ")
    three, word = line[at], line[at + 1]
    assert tk.decode([word]) == " if"
    healing = healer.heal(tk.encode("def f(x):\n    "))
    assert healing is not None and healing.text == "    "
    assert three in healing.allowed.tolist() and word not in healing.allowed.tolist()
    assert healing.left_after("    ", three) == " "
    assert word in healer.allowed(" ") and healing.left_after(" ", word) == ""
    four = tk.encode("def f(x):\n    ")[-1]
    assert (
        four in healing.allowed.tolist() and healing.left_after("    ", four) == ""
    )  # the removed token spells it all


def test_generate_spells_the_healed_text_over_several_tokens(healer: TokenHealer, bpe_tokenizer: Tokenizer) -> None:
    """When the first token is a shorter run of the healed whitespace, the next ones are held to the rest of it."""
    tk = bpe_tokenizer
    args = ModelArgs(vocab_size=tk.vocab_size, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=96,
                     max_seq_len=128)  # fmt: skip
    model = Transformer(args, open_device("cpu"))
    model.load(from_hf(args, init_random(args, seed=7).items()))
    for width in range(3, 9):
        healing = healer.heal(tk.encode("def add(a, b):\n" + " " * width))
        if healing is None or not healing.text.isspace():
            continue
        starts = [i for i in healing.allowed.tolist() if len(tk.decode([i])) < len(healing.text)]
        if not starts:
            continue
        forced = Healing(healing.prompt, healing.text, torch.tensor(starts), healer)  # the first token: a shorter run
        r = generate(Session(model, "s", max_tokens=64), forced.prompt, healing=forced, max_new_tokens=8, tokenizer=tk)
        written = tk.decode(r.tokens)
        assert len(tk.decode(r.tokens[:1])) < len(healing.text) and written.startswith(healing.text), (width, written)
        assert r.text == written[len(healing.text) :]
        break
    else:
        pytest.fail("no indentation whose healed run has a shorter run among the tokens")


def test_candidates_spelt_with_a_shorter_start_are_scored(shipped_tokenizer: Tokenizer) -> None:
    """A document's candidate after indentation (`if x:` after four spaces) is tokenized `   `, ` if`, ...: it is
    scored, with finite log-probabilities, instead of being skipped for not starting with the four-space token."""
    from waferline.engine.candidates import score_candidates

    tk = shipped_tokenizer
    healer = TokenHealer(tk)
    args = ModelArgs(vocab_size=tk.vocab_size, dim=32, n_layers=1, n_heads=2, n_kv_heads=1, intermediate_size=48,
                     max_seq_len=128)  # fmt: skip
    model = Transformer(args, open_device("cpu"))
    model.load(from_hf(args, init_random(args, seed=3).items()))
    healing = healer.heal(tk.encode("def f(x):\n    "))
    assert healing is not None
    stop = tk.token_to_id("<|endoftext|>")
    (got,) = score_candidates(Session(model, "c", max_tokens=64), healing.prompt, ["if x:"], tk, stop_ids=[stop],
                              healing=healing)  # fmt: skip
    assert got.text == "if x:" and all(lp > float("-inf") for lp in got.token_logprobs)


def test_nothing_to_heal(healer: TokenHealer, bpe_tokenizer: Tokenizer) -> None:
    tk = bpe_tokenizer
    fim_middle = tk.token_to_id("<|fim_middle|>")
    assert fim_middle is not None
    assert healer.heal([*tk.encode("x = 1"), fim_middle]) is None  # an empty prefix ends at a FIM marker
    assert healer.heal([]) is None and healer.heal(tk.encode("x")[:1]) is None
    ids = tk.encode("def add(a, b):\n    ret")
    assert healer.heal(ids, keep=len(ids)) is None  # the last token belongs to a part that must not change
    unique = next(
        i for i in range(tk.vocab_size) if i not in tk.special_ids and len(healer.allowed(tk.decode([i]))) == 1
    )
    assert healer.heal([*ids, unique]) is None  # no other token starts with its text: healing changes nothing


def test_mask_keeps_only_allowed_logits(healer: TokenHealer) -> None:
    healing = healer.heal(healer.tokenizer.encode("    ret"))
    assert healing is not None
    logits = torch.randn(1, healer.tokenizer.vocab_size)
    masked = healing.mask(logits)
    keep = torch.zeros(logits.shape[-1], dtype=torch.bool)
    keep[healing.allowed] = True
    assert torch.equal(masked[0, keep], logits[0, keep]) and torch.isneginf(masked[0, ~keep]).all()


def test_sentencepiece_style_tokenizers_are_not_healed(code_corpus: list[str]) -> None:
    sp = SentencePieceBPETokenizer()
    sp.train_from_iterator(code_corpus * 20, vocab_size=300, special_tokens=["<unk>"], show_progress=False)
    tk = Tokenizer(sp._tokenizer)
    healer = TokenHealer(tk)
    assert not healer.enabled and healer.heal(tk.encode("return sel")) is None


def test_generate_with_healing_constrains_the_first_token_and_hides_the_healed_text(
    healer: TokenHealer, bpe_tokenizer: Tokenizer
) -> None:
    tk = bpe_tokenizer
    args = ModelArgs(vocab_size=tk.vocab_size, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, intermediate_size=96,
                     max_seq_len=128)  # fmt: skip
    model = Transformer(args, open_device("cpu"))
    model.load(from_hf(args, init_random(args, seed=5).items()))
    ids = tk.encode("def add(a, b):\n    ret")
    healing = healer.heal(ids)
    assert healing is not None
    shown: list[str] = []
    session = Session(model, "h", max_tokens=64)
    r = generate(session, healing.prompt, healing=healing, max_new_tokens=6, tokenizer=tk,
                 on_token=lambda _t, delta: shown.append(delta))  # fmt: skip
    assert r.tokens[0] in healing.allowed.tolist()
    assert r.text == tk.decode(r.tokens)[len(healing.text) :]  # the healed text is the document's, not new
    assert "".join(shown) == r.text
    assert r.prompt_tokens == len(ids) - 1 and session.tokens == [*healing.prompt, *r.tokens[:-1]]
    with pytest.raises(ValueError, match=r"healing\.prompt"):
        generate(Session(model, "h2", max_tokens=64), ids, healing=healing, max_new_tokens=2, tokenizer=tk)


def test_text_tracker_skips_only_what_repeats_the_healed_text(bpe_tokenizer: Tokenizer) -> None:
    tracker = _TextTracker(bpe_tokenizer, [], [], skip="ret")
    assert tracker._unskipped("r") == "" and tracker._unskipped("eturn") == "urn" and tracker._unskipped("x") == "x"
    odd = _TextTracker(bpe_tokenizer, [], [], skip="ret")
    assert odd._unskipped("pass") == "pass" and odd.skip == ""  # not expected; then nothing is hidden
