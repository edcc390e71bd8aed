"""llama.cpp's programs for the tests (built by tests/support/build-llama-cpp.sh, which `make test` runs), and a
llama-server started on a free port of 127.0.0.1 for the duration of a test."""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from waferline.benchmarks.llama_cpp import free_port as _free_port  # tests/e2e use it too
from waferline.benchmarks.llama_cpp import healthy_server

ROOT = Path(__file__).resolve().parents[2]


def llama_cpp_bin() -> Path:
    """The folder holding llama-server and llama-quantize; the test is skipped (with the command that builds them)
    when they are not built, as on a bare `pytest` run outside `make test`."""
    cache = Path(os.environ.get("WAFERLINE_LLAMA_CPP_CACHE") or ROOT / ".cache" / "llama.cpp")
    for stamp in sorted(cache.glob("*/.stamp")):
        folder = stamp.parent / "bin"
        if (folder / "llama-server").is_file() and (folder / "llama-quantize").is_file():
            return folder
    pytest.skip("llama.cpp is not built: run `make llama-cpp` (make test does)")


def shipped_model_gguf(folder: Path) -> Path:
    """The shipped model exported as F32 GGUF into `folder`, for a llama-server to serve (skipped, as above, when
    llama.cpp is not built)."""
    from waferline.engine.checkpoint import DEFAULT_MODEL_DIR
    from waferline.engine.gguf.write import export_gguf

    llama_cpp_bin()
    return export_gguf(DEFAULT_MODEL_DIR, folder / "waferline-mini-f32.gguf", "f32")


@contextlib.contextmanager
def llama_server(model: Path, *extra: str, timeout_s: float = 60.0, port: int | None = None) -> Iterator[str]:
    """A llama-server for `model` on 127.0.0.1 (on `port`, or a free one); yields its base URL once /health answers
    200. `server_pid(url)` is its process id, for a test that kills it."""
    port = port or _free_port()
    cmd = [str(llama_cpp_bin() / "llama-server"), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
           "-t", "1", "-c", "1024", "--no-webui", "--no-repack", *extra]  # fmt: skip
    # --no-repack: llama.cpp's repacking of Q8_0/Q4_0 weights for AMX crashes the server (SIGSEGV while loading) on
    # these machines' CPUs, which report AMX; the tests compare numbers, not speed.
    url = f"http://127.0.0.1:{port}"
    with healthy_server(cmd, url, model.with_suffix(".server.log"), timeout_s=timeout_s) as proc:
        _PIDS[url] = proc.pid
        yield url


_PIDS: dict[str, int] = {}


def server_pid(url: str) -> int:
    """The process id of the llama-server `llama_server` started at `url`."""
    return _PIDS[url]


def post(url: str, body: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as r:
        result: dict[str, Any] = json.loads(r.read())
        return result
