#!/bin/sh
# guestimage.sh OUTDIR INIT - the test guest's kernel and initramfs (guest/README.md),
# made from the installed Debian kernel the micro-VM tier uses (scripts/vmkernel.sh):
#   OUTDIR/vmlinuz      the kernel, copied
#   OUTDIR/initrd.img   busybox (static), INIT as /init, and the modules that mount
#                       the host's system over 9p under a tmpfs overlay
#   OUTDIR/release      the kernel release
# Without a kernel image or busybox it says why and leaves OUTDIR alone (the
# guest tests then skip, naming the package).
set -eu
out=$1
init=$2
here=$(dirname "$0")
. "$here/vmkernel.sh"
rel=$(vm_release)
if [ -z "$rel" ]; then
    echo "guestimage.sh: no readable /boot/vmlinuz-*-amd64 with modules (linux-image-amd64)"
    exit 0
fi
bb=/bin/busybox
# static: it runs in the initramfs, before any library is reachable
if [ ! -x "$bb" ] || ldd "$bb" >/dev/null 2>&1; then
    echo "guestimage.sh: no static /bin/busybox (busybox-static)"
    exit 0
fi
vm_fresh "$out" "$rel" "$init" "$0" && exit 0
# virtio over PCI (the pc machine), 9p (the host's system and the results
# share), overlay for a writable root; the rest loads from the host's
# /lib/modules once the guest runs on it
mods="virtio_pci 9p 9pnet_virtio overlay"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/proc" "$tmp/sys" "$tmp/dev" "$tmp/lower" "$tmp/upper" "$tmp/newroot"
vm_modules "$rel" "$tmp" $mods
cp "$bb" "$tmp/bin/busybox"
ln -s busybox "$tmp/bin/sh"
cp "$init" "$tmp/init"
chmod 755 "$tmp/init"
vm_install "$tmp" "$out" "$rel"
echo "  GUEST   $out (kernel $rel, $(wc -l < "$tmp/modules.order") modules)"
