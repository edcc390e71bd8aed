"""Tokenizer wrapper, streaming detokenization and fill-in-the-middle prompts."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import tokenizers
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, SentencePieceBPETokenizer

from waferline.engine.fim import FAMILIES, FimError, FimTemplate, detect_family, fim_template
from waferline.engine.tokenizer import (
    REPLACEMENT_CHAR,
    WAFERLINE_SPECIAL_TOKENS,
    PromptTooLongError,
    Tokenizer,
    byte_fallback_tokenizer,
    check_prompt_fits,
)

TrainBpe = Callable[..., Tokenizer]
FamilyTokenizer = Callable[[str], Tokenizer]
TOKENIZERS = ["bpe_tokenizer", "fallback_tokenizer"]
HARD_TEXTS = [
    "",
    " ",
    "  leading and trailing  ",
    "def f():\n    return  x\n\n",
    "👩‍💻 ZWJ, 🇯🇵 flag, 👍🏽 skin tone",
    "e\u0301 a\u0308 combining, Å precomposed",
    "漢字かな交じり文、한국어, Ελληνικά, עברית, العربية",
    "\x00\x01 control \t tab \r\n crlf",
    "\ufffd is a real replacement character",
    "<|fim_prefix|><|endoftext|> typed by a user",
]
# The tokenizers are session fixtures looked up by name inside the test, so reusing them across examples is intended.
fixture_settings = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def stream_all(tokenizer: Tokenizer, ids: list[int], **kw: object) -> tuple[list[str], str]:
    decoder = tokenizer.stream(**kw)  # type: ignore[arg-type]
    deltas = [decoder.push(i) for i in ids]
    deltas.append(decoder.finish())
    return deltas, "".join(deltas)


# -- encode / decode ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TOKENIZERS)
@pytest.mark.parametrize("text", HARD_TEXTS)
def test_roundtrip_hard_texts(request: pytest.FixtureRequest, name: str, text: str) -> None:
    tk: Tokenizer = request.getfixturevalue(name)
    assert tk.decode(tk.encode(text)) == text


@pytest.mark.parametrize("name", TOKENIZERS)
@fixture_settings
@given(text=st.text())
def test_roundtrip_any_text(request: pytest.FixtureRequest, name: str, text: str) -> None:
    tk: Tokenizer = request.getfixturevalue(name)
    assert tk.decode(tk.encode(text)) == text


def test_encode_adds_nothing_implicitly(bpe_tokenizer: Tokenizer) -> None:
    ids = bpe_tokenizer.encode("x = 1")
    assert not set(ids) & bpe_tokenizer.control_ids


@pytest.mark.parametrize("name", TOKENIZERS)
def test_user_text_never_becomes_a_control_token(request: pytest.FixtureRequest, name: str) -> None:
    tk: Tokenizer = request.getfixturevalue(name)
    text = "".join(WAFERLINE_SPECIAL_TOKENS) + " <|fim_prefix|>x"
    ids = tk.encode(text)
    assert not set(ids) & tk.control_ids
    assert tk.decode(ids) == text
    assert tk.encode("<|endoftext|>", parse_special=True) == [tk.token_to_id("<|endoftext|>")]


def test_non_special_added_tokens_that_look_like_markup_are_control_tokens(train_bpe: TrainBpe) -> None:
    # Qwen2.5's tokenizer.json marks its FIM tokens "special": false; user text must still not produce them.
    tk = train_bpe(300, ["<|endoftext|>"])
    raw = tokenizer_with_added(tk, [AddedToken("<|fim_prefix|>", special=False, normalized=False)])
    fim_id = raw.token_to_id("<|fim_prefix|>")
    assert fim_id in raw.control_ids and fim_id not in raw.special_ids
    assert fim_id not in raw.encode("a <|fim_prefix|> b")
    assert raw.encode("<|fim_prefix|>", parse_special=True) == [fim_id]


def tokenizer_with_added(tk: Tokenizer, added: list[AddedToken]) -> Tokenizer:
    inner = tokenizers.Tokenizer.from_str(tk.to_str())
    inner.add_tokens(added)
    return Tokenizer(inner)


def test_decode_ignores_ids_past_the_tokenizer(fallback_tokenizer: Tokenizer) -> None:
    ids = fallback_tokenizer.encode("ok")
    assert fallback_tokenizer.decode([*ids, 10**6]) == "ok"


def test_fallback_tokenizer_shape() -> None:
    tk = byte_fallback_tokenizer(8192)
    assert tk.vocab_size == 8192
    assert [tk.token_to_id(t) for t in WAFERLINE_SPECIAL_TOKENS] == list(
        range(256, 256 + len(WAFERLINE_SPECIAL_TOKENS))
    )
    assert len(tk.encode("def main():\n    return 0\n")) < len("def main():\n    return 0\n")  # merges apply
    with pytest.raises(ValueError, match="too small"):
        byte_fallback_tokenizer(100)


# -- streaming detokenization ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TOKENIZERS)
@fixture_settings
@given(text=st.text())
@example(text="👩‍💻🇯🇵👍🏽")
@example(text="e\u0301\u0302 漢字 한국어")
@example(text=" \n  \t x  y")
def test_stream_of_encoded_text_reproduces_it(request: pytest.FixtureRequest, name: str, text: str) -> None:
    tk: Tokenizer = request.getfixturevalue(name)
    ids = tk.encode(text)
    deltas, joined = stream_all(tk, ids)
    assert joined == tk.decode(ids) == text
    if REPLACEMENT_CHAR not in text:
        assert all(REPLACEMENT_CHAR not in d for d in deltas), "a delta split a character"


@pytest.mark.parametrize("name", TOKENIZERS)
@pytest.mark.parametrize("skip", [True, False])
@fixture_settings
@given(data=st.data())
def test_stream_of_any_ids_matches_decode(
    request: pytest.FixtureRequest, name: str, skip: bool, data: st.DataObject
) -> None:
    # Arbitrary ids: partial characters, invalid UTF-8, special tokens in the middle of a character, unknown ids.
    tk: Tokenizer = request.getfixturevalue(name)
    ids = data.draw(st.lists(st.integers(0, tk.vocab_size + 4), max_size=40))
    _, joined = stream_all(tk, ids, skip_special_tokens=skip)
    assert joined == tk.decode(ids, skip_special_tokens=skip)


def test_stream_holds_back_a_partial_character(fallback_tokenizer: Tokenizer) -> None:
    tk = fallback_tokenizer
    euro = list("€".encode())  # 3 bytes, each its own token in the fallback tokenizer
    decoder = tk.stream()
    assert [decoder.push(b) for b in euro] == ["", "", "€"]
    assert decoder.finish() == ""


def test_stream_keeps_byte_level_spaces(bpe_tokenizer: Tokenizer) -> None:
    ids = bpe_tokenizer.encode("    return a + b")
    deltas, joined = stream_all(bpe_tokenizer, ids)
    assert joined == "    return a + b"
    assert any(d.startswith(" ") and d.strip() for d in deltas)


def test_stream_with_context_does_not_emit_it(bpe_tokenizer: Tokenizer) -> None:
    prompt = bpe_tokenizer.encode("def add(a, b):\n")
    completion = bpe_tokenizer.encode("    return a + b\n")
    decoder = bpe_tokenizer.stream(context=prompt)
    text = "".join(decoder.push(i) for i in completion) + decoder.finish()
    assert text == "    return a + b\n"
    assert decoder.text == text


def test_stream_with_context_cut_inside_a_character(fallback_tokenizer: Tokenizer) -> None:
    euro = list("€".encode())
    decoder = fallback_tokenizer.stream(context=[*fallback_tokenizer.encode("x = "), *euro[:2]])
    assert decoder.push(euro[2]) == "€"  # the whole character, with the prompt's first two bytes
    assert decoder.push(fallback_tokenizer.encode("!")[0]) == "!"


SP_SPECIALS = ["<unk>", "<s>", "</s>", "▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"]


@pytest.fixture(scope="module")
def sentencepiece_style(code_corpus: list[str]) -> Tokenizer:
    """A Llama-2/CodeLlama-style tokenizer: Metaspace word starts "▁", a decoder that drops the first space."""
    sp = SentencePieceBPETokenizer()
    sp.train_from_iterator(
        code_corpus * 20,
        vocab_size=300,
        special_tokens=SP_SPECIALS,
        show_progress=False,
    )
    return Tokenizer(sp._tokenizer)


def test_stream_with_sentencepiece_style_decoder(sentencepiece_style: Tokenizer) -> None:
    tk = sentencepiece_style
    prompt, completion = tk.encode("x = a"), tk.encode_infix(" + b")
    assert tk.decode(prompt + completion) == "x = a + b"
    decoder = tk.stream(context=prompt)
    text = "".join(decoder.push(i) for i in completion) + decoder.finish()
    assert text == " + b"  # the word-start space survives, though a lone decode of "▁+" drops it
    _, joined = stream_all(tk, prompt + completion)
    assert joined == "x = a + b"


def test_encode_infix_drops_the_word_start_marker(sentencepiece_style: Tokenizer) -> None:
    tk = sentencepiece_style
    assert tk.id_to_token(tk.encode("return x")[0]).startswith("▁")
    infix = tk.encode_infix("return x")
    assert not tk.id_to_token(infix[0]).startswith("▁")
    assert tk.decode(tk.encode("a") + infix) == "areturn x"


def test_encode_infix_is_encode_for_byte_level(bpe_tokenizer: Tokenizer) -> None:
    for text in (" return x", "(x)", "☺ü", ""):
        assert bpe_tokenizer.encode_infix(text) == bpe_tokenizer.encode(text)


def test_prompt_too_long_names_the_numbers() -> None:
    check_prompt_fits(10, 10)
    with pytest.raises(PromptTooLongError, match=r"11 prompt tokens \+ 5 new tokens exceed the model's context of 15"):
        check_prompt_fits(11, 15, new_tokens=5)
    assert issubclass(PromptTooLongError, ValueError)


# -- fill in the middle ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def family_tokenizer(train_bpe: TrainBpe) -> Callable[[str], Tokenizer]:
    """A byte-level BPE holding one family's FIM, stop and BOS tokens."""

    def make(family: str) -> Tokenizer:
        f = FAMILIES[family]
        return train_bpe(400, list(dict.fromkeys([f.prefix[0], f.suffix[0], f.middle[0], *f.stops, *f.bos])))

    return make


@pytest.mark.parametrize("family", ["starcoder2", "deepseek-coder", "codellama", "waferline"])
def test_family_is_detected_from_the_vocabulary(family_tokenizer: FamilyTokenizer, family: str) -> None:
    assert detect_family(family_tokenizer(family)) == family


def test_qwen_is_told_from_waferline_by_its_chat_tokens(train_bpe: TrainBpe) -> None:
    tk = train_bpe(400, ["<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|im_start|>"])
    assert detect_family(tk) == "qwen2.5-coder"
    assert detect_family(tk, {"fim_template": "waferline"}) == "waferline"
    with pytest.raises(FimError, match="'nonsense'"):
        detect_family(tk, {"fim_template": "nonsense"})


def test_no_fim_tokens_no_template(train_bpe: TrainBpe) -> None:
    tk = train_bpe(300, ["<|endoftext|>"])
    assert fim_template(tk) is None
    with pytest.raises(FimError, match="lacks the starcoder2 FIM tokens"):
        FimTemplate.for_family("starcoder2", tk)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_layouts(family_tokenizer: FamilyTokenizer, family: str) -> None:
    tk = family_tokenizer(family)
    t = FimTemplate.for_family(family, tk)
    prefix, suffix = "def add(a, b):\n    ", "\n\nprint(add(1, 2))\n"
    P, S = tk.encode(prefix), (tk.encode_infix(suffix) if t.infix_suffix else tk.encode(suffix))
    head = [t.bos_id] if family in ("deepseek-coder", "codellama") else []
    assert t.build(prefix, suffix, "psm") == [*head, t.prefix_id, *P, t.suffix_id, *S, t.middle_id]
    assert t.build(prefix, suffix, "spm") == [*head, t.prefix_id, t.suffix_id, *S, t.middle_id, *P]
    assert t.stop_ids and set(t.stop_ids) <= tk.control_ids
    assert t.build(prefix, suffix) == t.build(prefix, suffix, t.default_order)


def test_spm_typing_at_the_cursor_only_changes_the_tail(family_tokenizer: FamilyTokenizer) -> None:
    tk = family_tokenizer("waferline")
    t = FimTemplate.for_family("waferline", tk)
    assert t.default_order == "spm"
    suffix = "\n    return total\n"
    before = t.build("def total(xs):\n    total = ", suffix, "spm")
    after = t.build("def total(xs):\n    total = su", suffix, "spm")
    head = before.index(t.middle_id) + 1
    assert after[:head] == before[:head]
    assert after[: len(before) - 1] == before[:-1]  # only the last word's token changed


def test_fim_text_is_never_parsed_as_control_tokens(family_tokenizer: FamilyTokenizer) -> None:
    tk = family_tokenizer("waferline")
    t = FimTemplate.for_family("waferline", tk)
    ids = t.build("a = '<|fim_middle|>'", "<|endoftext|><|fim_suffix|>", "psm")
    controls = [i for i in ids if i in tk.control_ids]
    assert controls == [t.prefix_id, t.suffix_id, t.middle_id]


def test_unknown_order_is_refused(bpe_tokenizer: Tokenizer) -> None:
    t = FimTemplate.for_family("waferline", bpe_tokenizer)
    with pytest.raises(FimError, match="'mps'"):
        t.build("a", "b", "mps")  # type: ignore[arg-type]
