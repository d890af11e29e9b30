#!/usr/bin/env bash
# What the end-to-end test of the VS Code extension needs (tests/test_editors_vscode_e2e.py,
# docs/EDITORS.md): Debian's Chromium and ripgrep (apt), code-server 4.100.3 and
# playwright-core (npm, into editors/vscode/e2e/.deps, not globally), and the extension's
# own node_modules. Idempotent: what is there already is skipped. A cold run takes a few
# minutes (code-server builds native modules); needs the apt and npm registries.
#
# Why these pins and settings (seen on Debian 12 with Node 20):
# - code-server 4.100.3 is the last one that runs on Node 20 (4.103+ need Node 22).
# - npm_config_unsafe_perm / npm_config_yes: installing as root, without prompts.
# - nodedir=/usr: its native modules build against Debian's /usr/include/node.
# - libkrb5-dev: the kerberos native module needs gssapi.h.
# - @vscode/ripgrep's postinstall downloads rg from GitHub; its cache is pre-seeded with
#   Debian's /usr/bin/rg so it reports "Using cached download" instead.
# - the fonts: emoji and CJK in the test file show as glyphs in the screenshot.
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
DEPS=$HERE/.deps
CODE_SERVER=4.100.3
RIPGREP_PKG=1.15.11                    # @vscode/ripgrep in code-server 4.100.3's shrinkwrap
RIPGREP_ASSET=ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz
PLAYWRIGHT=1.65.1
APT_PACKAGES=(chromium ripgrep libkrb5-dev fonts-noto-color-emoji fonts-wqy-microhei)

say() { printf 'setup.sh: %s\n' "$*"; }

# -- apt ------------------------------------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" \
    || { "${sudo[@]}" apt-get update && "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; }
else
  say "apt packages: present"
fi

# -- node -----------------------------------------------------------------------------------
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" != 20 ]; then
  say "code-server $CODE_SERVER needs Node.js 20; this is $(node --version)" >&2
  exit 1
fi
export npm_config_unsafe_perm=true npm_config_yes=true npm_config_nodedir=/usr \
  npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

# -- the extension's own modules (npm run package needs them) -------------------------------
if [ ! -d ../node_modules ]; then
  say "npm ci in editors/vscode"
  (cd .. && npm ci)
fi

# -- code-server and playwright-core --------------------------------------------------------
installed() {
  node -e '
    const [dir, cs, pw] = process.argv.slice(1);
    const v = (p) => { try { return require(`${dir}/node_modules/${p}/package.json`).version; } catch { return null; } };
    const fs = require("fs");
    const argon = fs.existsSync(`${dir}/node_modules/argon2/lib/binding/napi-v3/argon2.node`);
    const rg = fs.existsSync(`${dir}/node_modules/code-server/lib/vscode/node_modules/@vscode/ripgrep/bin/rg`);
    process.exit(v("code-server") === cs && v("playwright-core") === pw && argon && rg ? 0 : 1);
  ' "$DEPS" "$CODE_SERVER" "$PLAYWRIGHT"
}
if installed; then
  say "code-server $CODE_SERVER and playwright-core $PLAYWRIGHT: present in $DEPS"
else
  mkdir -p "$DEPS"
  cat > "$DEPS/package.json" <<EOF
{
  "private": true,
  "description": "editors/vscode/e2e/setup.sh installs these; not part of the extension",
  "dependencies": { "code-server": "$CODE_SERVER", "playwright-core": "$PLAYWRIGHT" }
}
EOF
  tmp=$DEPS/tmp                         # npm's TMPDIR while installing: the ripgrep cache
  cache=$tmp/vscode-ripgrep-cache-$RIPGREP_PKG
  mkdir -p "$cache/stage"
  cp /usr/bin/rg "$cache/stage/rg"
  tar -C "$cache/stage" -czf "$cache/$RIPGREP_ASSET" rg
  rm -r "$cache/stage"
  say "npm install code-server@$CODE_SERVER playwright-core@$PLAYWRIGHT (a few minutes)"
  (cd "$DEPS" && TMPDIR=$tmp npm install --no-package-lock --foreground-scripts >"$DEPS/install.log" 2>&1) || {
    tail -40 "$DEPS/install.log" >&2
    exit 1
  }
  rm -rf "$tmp"
  installed || { say "the install finished but code-server is incomplete: $DEPS/install.log" >&2; exit 1; }
fi

# -- a check that touches nothing in ~ ------------------------------------------------------
check=$(mktemp -d)
trap 'rm -rf "$check"' EXIT
XDG_CONFIG_HOME=$check XDG_DATA_HOME=$check "$DEPS/node_modules/.bin/code-server" --version | grep -v '\] info '
/usr/bin/chromium --version 2>/dev/null
