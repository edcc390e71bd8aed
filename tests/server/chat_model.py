"""A tiny random-weight checkpoint with a chat template: an "instruction-following" model for tests.

Its answers are noise, but everything around them is real: the template is read from tokenizer_config.json,
rendered, encoded with the markup's control tokens, and generated through the engine.
"""

from __future__ import annotations

from pathlib import Path

from waferline.engine.checkpoint_save import save_checkpoint
from waferline.engine.hf import init_random
from waferline.engine.model import ModelArgs
from waferline.engine.tokenizer import WAFERLINE_SPECIAL_TOKENS, byte_fallback_tokenizer

# The shape of Qwen2.5's ChatML template.
CHATML = (
    "{%- for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] | trim + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)
CHAT_TOKENS = ("<|im_start|>", "<|im_end|>")


def save_chat_model(directory: Path, template: str | list[dict[str, str]] = CHATML) -> Path:
    args = ModelArgs.from_name("tiny")
    tokenizer = byte_fallback_tokenizer(args.vocab_size, (*WAFERLINE_SPECIAL_TOKENS, *CHAT_TOKENS))
    return save_checkpoint(
        directory,
        args,
        init_random(args, seed=1),
        tokenizer_json=tokenizer.to_str(),
        tokenizer_config={"chat_template": template},
        fim_template="waferline",
    )
