#!/bin/sh
# criu.sh - a criu that can dump on this host's kernel, for the namespaces
# tier's pause, resume and fork (docs/SNAPSHOTS.md).
#
# Debian 12's criu 3.17 cannot dump on kernels from 6.13 on ("Unexpected rt
# vDSO area bounds", criu#2532, fixed in CRIU 4.1); on Debian 12's own 6.1
# kernel it works and this script does nothing.  Where Debian's criu cannot
# dump on the running kernel, this puts Debian 13's (trixie) criu beside it:
# the criu package and the libraries it needs, downloaded by apt from
# Debian's archive (checked against Debian's archive keys) into a directory
# of their own, unpacked into /usr/local/lib/cellblock-criu with their own
# loader (patchelf), and /usr/local/sbin/criu linking to it.  Nothing of
# trixie is installed into the system: apt's sources, dpkg and /usr are
# untouched.  The launcher takes this criu only where Debian's does not fit
# the kernel (launcher/criu_dump.c).
#
#   sh scripts/criu.sh            install it where it is needed (as root),
#                                 else print the command to run
#   sh scripts/criu.sh --check    exit 0 when nothing is missing here
#   sh scripts/criu.sh --remove   remove it
set -eu

DEST=${CB_CRIU_DIR:-/usr/local/lib/cellblock-criu}  # where the criu and its libraries go
LINK=/usr/local/sbin/criu
SUITE=trixie
MIRROR=${CB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEY=/usr/share/keyrings/debian-archive-keyring.gpg
# where the packages put what is taken, relative to where they are unpacked
PKG_LIBDIR=usr/lib/x86_64-linux-gnu
PKG_CRIU=usr/sbin/criu
PKG_COPYRIGHT=usr/share/doc/criu/copyright

mode=install
case ${1:-} in
--check) mode=check ;;
--remove) mode=remove ;;
"") ;;
*) echo "usage: sh scripts/criu.sh [--check|--remove]" >&2; exit 2 ;;
esac

if [ "$mode" = remove ]; then
    [ "$(id -u)" = 0 ] || { echo "run: sudo sh scripts/criu.sh --remove"; exit 1; }
    [ ! -L "$LINK" ] || [ "$(readlink "$LINK")" != "$DEST/criu" ] || rm -f "$LINK"
    rm -rf "$DEST"
    echo "criu.sh: removed $DEST"
    exit 0
fi

# "X.Y" of a criu's --version as X*100+Y, 0 when it does not answer
version() {
    v=$("$1" --version 2>/dev/null | sed -n 's/^Version: \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
    [ -n "$v" ] || { echo 0; return; }
    # shellcheck disable=SC2086
    set -- $v
    echo $(($1 * 100 + $2))
}
kernel=$(uname -r | sed -n 's/^\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
# shellcheck disable=SC2086
set -- $kernel
kernel=$(($1 * 100 + $2))
debian=0
[ ! -x /usr/sbin/criu ] || debian=$(version /usr/sbin/criu)
if [ "$kernel" -lt 613 ] || [ "$debian" -ge 401 ]; then
    [ "$mode" = check ] || echo "criu.sh: Debian's criu dumps on this kernel: nothing to do"
    exit 0
fi
if [ -x "$DEST/criu" ] && [ "$(version "$DEST/criu")" -ge 401 ] &&
    [ "$(readlink "$LINK" 2>/dev/null)" = "$DEST/criu" ]; then
    [ "$mode" = check ] || echo "criu.sh: $LINK is Debian $SUITE's criu, in $DEST"
    exit 0
fi
[ "$mode" = install ] || exit 1
if [ "$(uname -m)" != x86_64 ]; then
    echo "criu.sh: only x86_64 is handled; install CRIU 4.1 or later as $LINK" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "criu.sh: Debian's criu cannot dump on kernel $(uname -r) (criu#2532)"
    echo "run: sudo sh scripts/criu.sh"
    exit 1
fi

command -v patchelf >/dev/null 2>&1 || {
    echo "criu.sh: installing patchelf"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends patchelf
}
work=$(mktemp -d /var/tmp/cellblock-criu.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/etc" "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" \
    "$work/unpacked"
: >"$work/status" # nothing installed: apt resolves the whole closure from trixie
signed=""
[ ! -f "$KEY" ] || signed="[signed-by=$KEY] "
echo "deb $signed$MIRROR $SUITE main" >"$work/etc/sources.list"
apt() {
    "$@" -o Dir::Etc::SourceList="$work/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache" \
        -o Dir::State::status="$work/status" -o APT::Sandbox::User=root
}
echo "criu.sh: Debian's criu cannot dump on kernel $(uname -r): fetching Debian $SUITE's"
apt apt-get update -qq
pkgs=$(apt apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances criu | grep -v '^ ' | grep -v '^<' | sort -u)
# shellcheck disable=SC2086
(cd "$work/debs" && apt apt-get download -qq $pkgs)
for d in "$work"/debs/*.deb; do dpkg-deb -x "$d" "$work/unpacked"; done
stage="$DEST.new"
rm -rf "$stage"
mkdir -p "$stage"
cp -a "$work/unpacked/$PKG_LIBDIR/." "$stage/"
cp "$work/unpacked/$PKG_CRIU" "$stage/criu"
# its own loader and libraries, before any of the system's (RPATH: for the
# libraries' own dependencies too)
patchelf --set-interpreter "$DEST/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$DEST" \
    "$stage/criu"
cp "$work/unpacked/$PKG_COPYRIGHT" "$stage/copyright" 2>/dev/null || true
rm -rf "$DEST"
mv "$stage" "$DEST"
chmod -R go-w "$DEST"
v=$(version "$DEST/criu")
if [ "$v" -lt 401 ] || ! "$DEST/criu" check >/dev/null 2>&1; then
    echo "criu.sh: Debian $SUITE's criu does not pass criu check here" >&2
    rm -rf "$DEST"
    exit 1
fi
mkdir -p "$(dirname "$LINK")"
ln -sfn "$DEST/criu" "$LINK"
echo "criu.sh: $LINK is Debian $SUITE's criu $("$LINK" --version | sed -n 's/^Version: //p'), in $DEST"
