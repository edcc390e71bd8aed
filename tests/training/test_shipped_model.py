"""The model in engine/models/waferline-mini loads in waferline and in transformers, and both decode alike."""

import json

import pytest
import torch

from waferline.engine.checkpoint import DEFAULT_MODEL_DIR, load_model

pytestmark = pytest.mark.skipif(
    not (DEFAULT_MODEL_DIR / "model.safetensors").is_file(), reason="the shipped model has not been trained yet"
)

PROMPT_PREFIX = (
    "import os\n\n\ndef list_python_files(root):\n    result = []\n    for name in os.listdir(root):\n        "
)
PROMPT_SUFFIX = "\n    return result\n"


def test_artefact_is_complete_small_and_standard() -> None:
    names = {p.name for p in DEFAULT_MODEL_DIR.iterdir()}
    want = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"}
    assert want | {"README.md"} <= names
    assert sum(p.stat().st_size for p in DEFAULT_MODEL_DIR.iterdir()) <= 30 * 2**20
    cfg = json.loads((DEFAULT_MODEL_DIR / "config.json").read_text())
    assert cfg["model_type"] == "qwen2" and cfg["vocab_size"] == 8192 and cfg["hidden_size"] == 256
    tok_cfg = json.loads((DEFAULT_MODEL_DIR / "tokenizer_config.json").read_text())
    assert tok_cfg["fim_template"] == "waferline"


def test_waferline_and_transformers_give_the_same_greedy_tokens() -> None:
    transformers = pytest.importorskip("transformers")
    lm = load_model(DEFAULT_MODEL_DIR)
    assert lm.fim is not None and lm.fim.family == "waferline"
    prompt = lm.fim.build(PROMPT_PREFIX, PROMPT_SUFFIX, "spm")
    stops = set(lm.special.stop_ids)
    n_new = 24
    kv = lm.model.open_cache(len(prompt) + n_new)
    ours: list[int] = []
    with torch.no_grad():
        logits = lm.model.forward(torch.tensor(prompt), kv, 0)
        while len(ours) < n_new:
            t = int(logits[-1].argmax())
            ours.append(t)
            if t in stops:
                break
            logits = lm.model.forward(torch.tensor([t]), kv, len(prompt) + len(ours) - 1)
    hf = transformers.AutoModelForCausalLM.from_pretrained(DEFAULT_MODEL_DIR, dtype=torch.float32)
    with torch.no_grad():
        out = hf.generate(
            torch.tensor([prompt]), max_new_tokens=n_new, do_sample=False, eos_token_id=sorted(stops), pad_token_id=0
        )
    theirs = out[0, len(prompt) :].tolist()
    assert ours == theirs[: len(ours)] and len(ours) == len(theirs)
    # transformers' tokenizer reads the same tokenizer.json: same ids for plain text
    hf_tok = transformers.AutoTokenizer.from_pretrained(DEFAULT_MODEL_DIR)
    assert hf_tok(PROMPT_PREFIX)["input_ids"] == lm.tokenizer.encode(PROMPT_PREFIX)
