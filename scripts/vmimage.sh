#!/bin/sh
# vmimage.sh OUTDIR INIT - the micro-VM's guest kernel and initramfs, made once
# at build time from the Debian kernel installed on this machine
# (linux-image-amd64, see scripts/deps.sh):
#   OUTDIR/vmlinuz      the kernel, copied
#   OUTDIR/initrd.img   a newc cpio: /init (tiers/init.c, static) and the modules
#                       the guest needs (virtio transports, virtio-serial,
#                       virtio-rng, 9p), in load order (/modules.order)
#   OUTDIR/release      the kernel release, for the banner
# Without a kernel image it says so and leaves OUTDIR alone: the microvm tier
# then fails closed at start with the fix.
set -eu
out=$1
init=$2
. "$(dirname "$0")/vmkernel.sh"
rel=$(vm_release)
if [ -z "$rel" ]; then
    echo "vmimage.sh: no readable /boot/vmlinuz-*-amd64 with modules; the microvm tier needs" \
         "linux-image-amd64: sh scripts/deps.sh tiers installs it (as root), then make"
    exit 0
fi
vm_fresh "$out" "$rel" "$init" "$0" && exit 0
mods="virtio_mmio virtio_pci virtio_console virtio_rng 9p 9pnet_virtio"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/proc" "$tmp/sys" "$tmp/dev" "$tmp/newroot"
vm_modules "$rel" "$tmp" $mods
cp "$init" "$tmp/init"
vm_install "$tmp" "$out" "$rel"
echo "  VM      $out (guest kernel $rel, $(wc -l < "$tmp/modules.order") modules)"
