"""GGUF files in and out: llama.cpp's single-file model format (weights, shape and tokenizer in one file).

`names.py` holds what both directions share (the tensor names, architectures and pre-tokenizers waferline maps),
`read.py` loads a GGUF file of a Llama-, Qwen2- or Qwen3-family model into the engine, `write.py` exports a Hugging Face
model directory (the shipped model, a training run's export) as GGUF for llama.cpp and the tools built on it.
The `gguf` package from PyPI, maintained with llama.cpp, reads and writes the container and (de)quantises blocks.
`pretokenizers.py` is llama.cpp's table of the pre-tokenizers a file names (`tokenizer.ggml.pre`), which the
reader turns into the tokenizers library's splits.
"""
