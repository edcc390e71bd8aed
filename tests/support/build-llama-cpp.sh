#!/usr/bin/env bash
# Builds llama.cpp's llama-server and llama-quantize for the tests that run waferline's GGUF files and remote-engine
# code against the real thing, idempotently, caching under .cache/llama.cpp (ignored by git): a second run checks a
# stamp and returns at once. PyPI carries llama.cpp only inside the llama-cpp-python source distribution, which
# vendors llama.cpp's whole tree (tools/server included); only the two programs are built from it, with cmake and
# ninja (about 7-10 minutes on 2 cores). Prints the folder that holds the programs.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VERSION=0.3.36  # llama-cpp-python; the llama.cpp it vendors is what the tests ran against
CACHE="${WAFERLINE_LLAMA_CPP_CACHE:-$ROOT/.cache/llama.cpp}/$VERSION"
PIP="${PIP:-$ROOT/.venv/bin/pip}"
APT_PACKAGES=(cmake ninja-build g++)

say() { echo "[llama.cpp] $*" >&2; }

if [[ -x "$CACHE/bin/llama-server" && -x "$CACHE/bin/llama-quantize" && -f "$CACHE/.stamp" ]]; then
  echo "$CACHE/bin"
  exit 0
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    say "missing Debian packages: ${missing[*]} — run as root: apt-get install ${missing[*]}"
    exit 1
  fi
  say "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p "$CACHE/src"
SDIST="$CACHE/src/llama_cpp_python-$VERSION.tar.gz"
if [[ ! -f "$SDIST" ]]; then
  say "downloading the llama-cpp-python $VERSION source distribution (77 MB)"
  "$PIP" download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$CACHE/src"
fi
TREE="$CACHE/src/llama_cpp_python-$VERSION/vendor/llama.cpp"
[[ -d "$TREE" ]] || tar -xzf "$SDIST" -C "$CACHE/src"

say "building llama-server and llama-quantize (several minutes on 2 cores; cached afterwards)"
cmake -S "$TREE" -B "$CACHE/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  >"$CACHE/cmake.log" 2>&1 || { tail -20 "$CACHE/cmake.log" >&2; exit 1; }
ninja -C "$CACHE/build" -j "${LLAMA_BUILD_JOBS:-$(nproc)}" llama-server llama-quantize >"$CACHE/build.log" 2>&1 \
  || { tail -30 "$CACHE/build.log" >&2; exit 1; }
mkdir -p "$CACHE/bin"
cp "$CACHE/build/bin/llama-server" "$CACHE/build/bin/llama-quantize" "$CACHE/bin/"
rm -rf "$CACHE/src/llama_cpp_python-$VERSION"  # the tree (600 MB unpacked); the sdist stays for a rebuild
touch "$CACHE/.stamp"
echo "$CACHE/bin"
