#!/usr/bin/env bash
# Builds the Debian 12 package: dist/latchkey_<version>_<arch>.deb (dpkg-deb), printed as the last
# line of stdout. Progress goes to stderr.
#
#   /usr/bin/latchkey                       release build, the Swift standard library linked in
#                                           (--static-swift-stdlib: no toolchain library at run time)
#   /usr/share/latchkey/web/                the web app and console (serve finds it beside the binary)
#   /lib/systemd/system/latchkey.service    deploy/systemd/latchkey.service
#   /etc/latchkey/latchkey.env              deploy/debian/latchkey.env, a conffile, 0640 root:latchkey,
#                                           no working secret (the admin key and the KEK are the operator's)
#   postinst                                the `latchkey` system user; nothing enabled or started
#   Depends                                 the package of every library the binary links (ldd + dpkg -S)
#
# The release build has its own scratch folder (data/release-build, LATCHKEY_RELEASE_SCRATCH), so the
# debug build is untouched; scripts/container-test.sh builds its image from this same .deb.
# LATCHKEY_RELEASE_BIN: package this already built binary instead of building.
# `package.sh --binary-only` builds the release binary and prints its path, and packages nothing
# (scripts/test.sh builds it so in the background, while other stages wait on servers and browsers).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
log() { printf 'package: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
eval "$(bash scripts/install-deps.sh binutils)"

scratch="${LATCHKEY_RELEASE_SCRATCH:-$REPO/data/release-build}"
if [[ -n "${LATCHKEY_RELEASE_BIN:-}" ]]; then
  binary="$LATCHKEY_RELEASE_BIN"
else
  log "swift build -c release --static-swift-stdlib (scratch $scratch)"
  swift build -c release --product latchkey --static-swift-stdlib --scratch-path "$scratch" >&2
  binary="$(swift build -c release --scratch-path "$scratch" --show-bin-path)/latchkey"
fi
[[ -x "$binary" ]] || die "no binary at $binary"
if [[ "${1:-}" == --binary-only ]]; then echo "$binary"; exit 0; fi

# No toolchain library at run time: the package must run where no Swift is installed.
libs="$(ldd "$binary")"
if grep -E 'libswift|libFoundation|libdispatch|libBlocksRuntime|/opt/swift|not found' <<<"$libs" >&2; then
  die "the binary links a Swift toolchain library or misses one (above): build with --static-swift-stdlib"
fi

version="$("$binary" --version | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1)"
[[ -n "$version" ]] || die "latchkey --version printed no version"
arch="$(dpkg --print-architecture)"

# Depends: the Debian package that holds each shared library the binary names (NEEDED; what those
# load in turn is their packages' business).
depends=()
for soname in $(objdump -p "$binary" | awk '$1 == "NEEDED" { print $2 }'); do
  # "soname => /path (…)", or the loader's own "/lib64/ld-linux-x86-64.so.2 (…)".
  path="$(awk -v s="$soname" '$1 == s && $2 == "=>" { print $3 } substr($1, length($1) - length(s)) == "/" s { print $1 }' <<<"$libs" | head -n 1)"
  [[ -n "$path" ]] || die "ldd does not resolve $soname"
  owner="$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null || true)"
  [[ -n "$owner" ]] || die "no Debian package owns $path ($soname)"
  depends+=("${owner%%:*}")
done
# useradd/groupadd for postinst; the Public Suffix List the rpId is checked against at start.
depends+=(passwd publicsuffix)
depends_line="$(printf '%s\n' "${depends[@]}" | sort -u | paste -sd, - | sed 's/,/, /g')"
log "Depends: $depends_line"

stage="$REPO/data/package/root"
rm -rf "$stage"
mkdir -p "$stage/DEBIAN" "$stage/usr/bin" "$stage/usr/share/latchkey" "$stage/lib/systemd/system" \
  "$stage/etc/latchkey" "$stage/usr/share/doc/latchkey"
# Symbols stay (a crash's backtrace names functions); debug info goes.
objcopy --strip-debug "$binary" "$stage/usr/bin/latchkey"
chmod 0755 "$stage/usr/bin/latchkey"
cp -r web "$stage/usr/share/latchkey/web"
install -m 0644 deploy/systemd/latchkey.service "$stage/lib/systemd/system/latchkey.service"
install -m 0640 deploy/debian/latchkey.env "$stage/etc/latchkey/latchkey.env"
install -m 0644 LICENSE "$stage/usr/share/doc/latchkey/copyright"
for script in postinst prerm postrm; do install -m 0755 "deploy/debian/$script" "$stage/DEBIAN/$script"; done
echo /etc/latchkey/latchkey.env > "$stage/DEBIAN/conffiles"
find "$stage/usr/share/latchkey/web" -type d -exec chmod 0755 {} + -o -type f -exec chmod 0644 {} +
size="$(du -sk --exclude=DEBIAN "$stage" | cut -f1)"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: latchkey
Version: $version
Architecture: $arch
Maintainer: Latchkey <latchkey@localhost>
Installed-Size: $size
Depends: $depends_line
Section: net
Priority: optional
Description: passkey (WebAuthn) relying-party server
 Latchkey runs passkey ceremonies for web pages and iOS/Android apps, verifies
 hardware-bound device keys for step-up approval, and keeps every credential in
 PostgreSQL. The service is installed but not enabled: fill in
 /etc/latchkey/latchkey.env and /etc/latchkey/kek first (docs/operator.md).
CONTROL

mkdir -p dist
deb="$REPO/dist/latchkey_${version}_${arch}.deb"
rm -f dist/latchkey_*.deb
dpkg-deb --root-owner-group -Zxz -z1 --build "$stage" "$deb" >&2
log "built $deb ($(du -h "$deb" | cut -f1))"
echo "$deb"
