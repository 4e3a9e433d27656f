#!/usr/bin/env bash
# Installs what Latchkey needs to build, test and run on Debian 12, only when missing:
# the C libraries it links (OpenSSL 3, libcbor, libpq, libmicrohttpd, libcurl over OpenSSL for webhooks and `mds fetch`), pkg-config, PostgreSQL,
# python3 (the CLI vector check), python3-aiosmtpd (the real SMTP server the tests mail, scripts/smtp.sh) and
# publicsuffix (the Public Suffix List that LATCHKEY_RP_ID and related origins are checked against). The Swift 6 toolchain must already be installed
# (/opt/swift on this project's machines); it is not in Debian's archive.
# Arguments: more Debian packages to install when missing (Tests/Browser/run.sh: chromium, …).
# Prints `export PATH=…` when swift is not on PATH yet: callers run `eval "$(bash scripts/install-deps.sh)"`.
set -euo pipefail
log() { printf 'install-deps: %s\n' "$*" >&2; }

packages=(libssl-dev libcbor-dev libpq-dev libmicrohttpd-dev libcurl4-openssl-dev pkg-config postgresql python3 ca-certificates libcurl4 python3-aiosmtpd publicsuffix "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing: ${missing[*]}"
  SUDO=()
  [[ $EUID -eq 0 ]] || SUDO=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  # Two installs at once (scripts/test.sh builds in the background while a stage installs what it
  # needs) take turns at dpkg's lock instead of failing on it.
  "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=900 update -qq
  "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if ! command -v swift >/dev/null 2>&1; then
  for d in /opt/swift/usr/bin /usr/share/swift/usr/bin; do
    [[ -x "$d/swift" ]] && { echo "export PATH=$d:\$PATH"; exit 0; }
  done
  log "error: no Swift 6 toolchain found (expected swift on PATH or /opt/swift/usr/bin)"
  exit 1
fi
