#!/bin/sh
# deps.sh - make sure the Debian packages cellblock builds and tests with are
# present.  As root it installs what is missing with apt-get; otherwise it
# prints the exact command and fails.
set -eu
#
# Besides the build and the libraries the tests import, the list has what the
# README's commands and the tests run: the `jupyter console`, `jupyter notebook`
# and `jupyter nbconvert` scripts (Debian ships them apart from the Python
# modules), pip for %pip, tmux, chromium (the browser test; never downloaded),
# c-ares for cellblock-proxy, openssl and curl for the proxy's tests,
# ipywidgets, comm and the Notebook's widget extension (widgets, issue 12); the
# fuzzing and isolation-tier packages are explained below the list.
PKGS="build-essential pkg-config libzmq3-dev libczmq-dev libjansson-dev libsodium-dev
libseccomp-dev libc-ares-dev python3-jupyter-client python3-ipykernel python3-jupyter-kernel-test
python3-pytest python3-numpy python3-pandas python3-matplotlib python3-nbclient python3-tqdm
python3-pip jupyter-console python3-notebook jupyter-notebook python3-nbconvert
jupyter-nbconvert tmux procps iproute2 chromium fonts-dejavu-core openssl curl
python3-jupyter-server python3-ipywidgets python3-comm jupyter-nbextension-jupyter-js-widgets
clang-14 libclang-rt-14-dev llvm-14
runsc qemu-system-x86 linux-image-amd64 cpio kmod"
# (clang-14 + libclang-rt-14-dev: the libFuzzer/ASan/UBSan/LSan runtimes of
# `make fuzz-smoke`, which `make test` runs; the runtimes are only a
# Recommends of clang-14.  llvm-14: llvm-symbolizer for readable reports.)
# (runsc: --isolation gvisor; qemu-system-x86 + linux-image-amd64: --isolation
#  microvm, whose guest kernel scripts/vmimage.sh extracts at build time; the
#  generic flavour because the cloud one has no 9p)
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' \
        || missing="$missing $p"
done
# tests/frontends needs node + npm: use the machine's if it has them (e.g. a
# NodeSource Node 20, which Debian's npm would conflict with), else Debian's
# (Node 18, which the locked playwright-core supports).
command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "deps.sh: installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing
else
    echo "deps.sh: missing Debian packages:$missing"
    echo "run: sudo apt-get update && sudo apt-get install -y$missing"
    exit 1
fi
