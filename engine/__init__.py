"""waferline.engine — tokenizer, model, KV-cached sessions and generation. Knows tokens; never LSP."""
