#!/bin/sh
# deps.sh [--dry-run] [GROUP...] - make sure the Debian packages of the named
# groups are present (no group: core).  As root it installs what is missing
# with apt-get; otherwise it prints the exact command and fails.  --dry-run
# prints what it would install and installs nothing (exit 0); --list prints
# every package of the groups, installed or not (what a new machine gets).
#
#   core   build cellblock and run `make demo` on the default (namespaces)
#          tier: the C toolchain and libraries, jupyter_client and nbclient,
#          IPython for the kernel's shell, pandas and matplotlib for the demo
#   test   what `make test` adds (it installs core, test, tiers and fuzz):
#          pytest, the control kernel, the Jupyter frontends, Chromium, ...
#   tiers  --isolation gvisor (runsc) and --isolation microvm (QEMU and a
#          Debian kernel, from which `make` extracts the guest image)
#   fuzz   `make fuzz` and `make fuzz-smoke`: clang and its sanitizer runtimes
#   guest  the cgroup v2 test guest (`make test-guest`, a subset in make test)
#   all    every group
#
# A group is a list of packages, one per line, each with why it is there:
# to add a package to a group, add its line.
set -eu

core='
build-essential             # cc, make, the libc headers (cellblock-init is static)
pkg-config
libzmq3-dev
libczmq-dev
libjansson-dev
libsodium-dev
libseccomp-dev
libc-ares-dev               # cellblock-proxy (--network allow:)
libprotobuf-c-dev           # the records of a CRIU image the launcher edits (--pausable)
protobuf-c-compiler         # ... their code, made from launcher/criu_img.proto
libzstd-dev                 # ... whose memory pages the launcher compresses into the image
libssl-dev                  # libcrypto: the kernel HMAC-SHA256 and SHA-256 of paused images (issue 20);
                            #   libssl: the proxy TLS for --secret hosts
python3-jupyter-client      # the client side: make demo, the tests, cellblock.Sandbox
python3-nbclient            # make demo runs examples/demo.ipynb with it
python3-ipython             # the kernel runs IPython inside the sandbox when it is there
python3-pandas              # the demo notebook
python3-matplotlib          # the demo notebook (and the runner preloads it)
'

test='
python3-ipykernel           # the control kernel of every comparison
python3-jupyter-kernel-test
python3-pytest
python3-numpy
python3-tqdm                # the widget tests
python3-pip                 # %pip
jupyter-console             # the README commands the tests run (Debian ships the
python3-notebook            #   jupyter scripts apart from the Python modules)
jupyter-notebook
python3-nbconvert
jupyter-nbconvert
python3-jupyter-server
python3-ipywidgets          # widgets and comms (issue 12)
python3-comm
jupyter-nbextension-jupyter-js-widgets
tmux                        # the terminal frontend test
procps
iproute2
chromium                    # the browser test (Debian'"'"'s; never downloaded)
fonts-dejavu-core
openssl                     # the network-allowlist tests
curl
python3-requests            # the secrets tests call a local API through requests, as agents do
python3-debugpy             # the debugger (issue 23): pydevd inside the sandbox
'

tiers='
runsc                       # --isolation gvisor
qemu-system-x86             # --isolation microvm
linux-image-amd64           # its guest kernel (generic: the cloud flavour has no 9p)
cpio                        # scripts/vmimage.sh packs the guest initramfs
kmod                        # ... with the modules modprobe lists
zstd                        # ... decompressed when packed as .ko.zst (scripts/vmkernel.sh;
                            # the test guest image too, whose make target needs this group)
'

guest='
busybox-static              # the test guest (issue 19, make test-guest): its initramfs /init
podman                      # a container on a cgroup v2 host, run in the guest
crun                        # ... the runtime the guest containers run with
runc                        # ... podman default here, which deploy/container/base.sh import asks for
debootstrap                 # ... its base image, made by base.sh
criu                        # the --pausable dump in the guest (criu 3.17 of Debian 12 cannot
                            # run on kernels from 6.13 on; the guest runs 6.1)
'

fuzz='
clang-14                    # libFuzzer and ASan/UBSan/LSan: make fuzz-smoke (in make test)
libclang-rt-14-dev          # the runtimes (only a Recommends of clang-14)
llvm-14                     # llvm-symbolizer, for readable reports
'

# What a group wants newer than Debian 12 itself has, from Debian 12's own
# backports: "package least-version".  apt installs nothing from
# bookworm-backports unless asked (-t), so adding it changes nothing else.
#   runsc: gVisor from 2023 on writes checkpoint images uncompressed, so a
#   paused gvisor session resumes in about half a second instead of two
#   (docs/SNAPSHOTS.md); an older runsc still works, and compresses.
BPO_SUITE=bookworm-backports
BPO_SOURCES=/etc/apt/sources.list.d/debian-bookworm-backports.sources
bpo_tiers='runsc 0.0~20240729'

s_group() {
    case $1 in
    core) printf '%s\n' "$core" ;;
    test) printf '%s\n' "$test" ;;
    tiers) printf '%s\n' "$tiers" ;;
    fuzz) printf '%s\n' "$fuzz" ;;
    guest) printf '%s\n' "$guest" ;;
    esac | sed 's/#.*//'
}

dry=0
list=0
groups=""
for a in "$@"; do
    case $a in
    --dry-run | -n) dry=1 ;;
    --list) list=1 ;;
    all) groups="$groups core test tiers fuzz guest" ;;
    core | test | tiers | fuzz | guest) groups="$groups $a" ;;
    *)
        echo "deps.sh: unknown group '$a' (core, test, tiers, fuzz, guest, all)" >&2
        exit 2
        ;;
    esac
done
[ -n "$groups" ] || groups=core

want=""
for g in $groups; do
    want="$want $(s_group "$g")"
done
if [ "$list" = 1 ]; then
    # shellcheck disable=SC2086
    echo $want
    exit 0
fi
missing=""
for p in $want; do
    case " $missing " in *" $p "*) continue ;; esac
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' \
        || missing="$missing $p"
done
# tests/frontends needs node + npm: the machine's if it has them (e.g. a
# NodeSource Node 20, which Debian's npm would conflict with), else Debian's
# (Node 18, which the locked playwright-core supports).
case " $groups " in
*" test "*) command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm" ;;
esac
# on Debian 12, what is older than a group wants comes from its backports
# shellcheck disable=SC1091
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}") || codename=""
bpo=""
if [ "$codename" = bookworm ]; then
    for g in $groups; do
        [ "$g" = tiers ] || continue
        # shellcheck disable=SC2086
        set -- $bpo_tiers
        have=$(dpkg-query -W -f='${Version}' "$1" 2>/dev/null) || have=""
        if [ -z "$have" ] || dpkg --compare-versions "$have" lt "$2"; then
            bpo="$bpo $1"
            rest=""
            for p in $missing; do [ "$p" = "$1" ] || rest="$rest $p"; done
            missing=$rest
        fi
    done
fi
[ -z "$missing$bpo" ] && exit 0
has_bpo() { grep -rqsE "^[^#]*[[:space:]]$BPO_SUITE([[:space:]]|$)" /etc/apt/sources.list /etc/apt/sources.list.d/; }
if [ "$dry" = 1 ]; then
    [ -z "$missing" ] || echo "deps.sh ($groups ): would install:$missing"
    [ -z "$bpo" ] || echo "deps.sh ($groups ): would install from $BPO_SUITE:$bpo"
elif [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    if [ -n "$bpo" ] && ! has_bpo; then
        echo "deps.sh ($groups ): adding Debian's $BPO_SUITE to apt's sources ($BPO_SOURCES)"
        # signed by Debian's archive key (apt's own trusted keys where the
        # keyring package is not installed)
        key=/usr/share/keyrings/debian-archive-keyring.gpg
        {
            printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" "Suites: $BPO_SUITE" \
                "Components: main"
            [ ! -f "$key" ] || echo "Signed-By: $key"
        } >"$BPO_SOURCES"
    fi
    apt-get update -qq
    if [ -n "$missing" ]; then
        echo "deps.sh ($groups ): installing:$missing"
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $missing
    fi
    if [ -n "$bpo" ]; then
        echo "deps.sh ($groups ): installing from $BPO_SUITE:$bpo"
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends -t "$BPO_SUITE" $bpo
    fi
else
    [ -z "$missing" ] || echo "deps.sh ($groups ): missing Debian packages:$missing"
    [ -z "$bpo" ] || echo "deps.sh ($groups ): wanted newer, from $BPO_SUITE:$bpo"
    add=""
    if [ -n "$bpo" ] && ! has_bpo; then
        add="printf 'Types: deb\\nURIs: http://deb.debian.org/debian\\nSuites: $BPO_SUITE\\nComponents: main\\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\\n' | sudo tee $BPO_SOURCES && "
    fi
    cmd="${add}sudo apt-get update"
    [ -z "$missing" ] || cmd="$cmd && sudo apt-get install -y$missing"
    [ -z "$bpo" ] || cmd="$cmd && sudo apt-get install -y -t $BPO_SUITE$bpo"
    printf 'run: %s\n' "$cmd"
    exit 1
fi
