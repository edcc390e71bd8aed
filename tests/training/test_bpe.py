from waferline.engine.tokenizer import Tokenizer
from waferline.training.bpe import SPECIAL_TOKENS, chars_per_token, train_tokenizer
from waferline.training.fim import FimIds


def test_special_tokens_have_the_first_ids(tokenizer: Tokenizer) -> None:
    assert [tokenizer.token_to_id(s) for s in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    ids = FimIds.of(tokenizer)
    assert (ids.eot, ids.prefix, ids.suffix, ids.middle) == (0, 1, 2, 3)


def test_round_trip_of_code_unicode_and_odd_whitespace(tokenizer: Tokenizer) -> None:
    for text in ["def f(x):\n\treturn x  # tab\n", "naïve = 'café ☕ 日本'\r\n", "   \n\n\n  x=1", "emoji 🐍"]:
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_control_token_strings_in_source_stay_text(tokenizer: Tokenizer) -> None:
    ids = tokenizer.encode("s = '<|fim_prefix|>'")
    assert not set(ids) & {0, 1, 2, 3, 4}
    assert tokenizer.decode(ids) == "s = '<|fim_prefix|>'"


def test_vocabulary_size_and_compression() -> None:
    texts = ["def add(a, b):\n    return a + b\n"] * 20 + ["class A:\n    pass\n"] * 20
    raw = train_tokenizer(texts, vocab_size=300)
    assert raw.get_vocab_size() <= 300
    assert chars_per_token(raw, texts) > 2.0  # merges learned: more than one byte per token
