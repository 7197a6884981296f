#!/bin/sh
# vmimage.sh OUTDIR INIT - the micro-VM's guest kernel and initramfs, made once
# at build time from the Debian kernel installed on this machine
# (linux-image-amd64, see scripts/deps.sh):
#   OUTDIR/vmlinuz      the kernel, copied
#   OUTDIR/initrd.img   a newc cpio: /init (vm/init.c, static) and the modules
#                       the guest needs (virtio transports, virtio-serial,
#                       virtio-rng, 9p), in load order (/modules.order)
#   OUTDIR/release      the kernel release, for the banner
# Without a kernel image it says so and leaves OUTDIR alone: the microvm tier
# then fails closed at start with the fix.
set -eu
out=$1
init=$2
# the newest installed generic kernel that has 9p (the cloud flavour does not)
rel=""
for f in $(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | sort -V); do
    r=${f#/boot/vmlinuz-}
    case $r in *cloud*) continue ;; esac
    [ -r "$f" ] && [ -d "/lib/modules/$r" ] && rel=$r
done
if [ -z "$rel" ]; then
    echo "vmimage.sh: no readable /boot/vmlinuz-*-amd64 with modules; the microvm tier needs" \
         "linux-image-amd64 (scripts/deps.sh installs it as root)"
    exit 0
fi
if [ -f "$out/release" ] && [ "$(cat "$out/release")" = "$rel" ] && [ "$out/initrd.img" -nt "$init" ] \
   && [ "$out/initrd.img" -nt "$0" ]; then
    exit 0
fi
mods="virtio_mmio virtio_pci virtio_console virtio_rng 9p 9pnet_virtio"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lib/modules" "$tmp/proc" "$tmp/sys" "$tmp/dev" "$tmp/newroot"
: > "$tmp/modules.order"
for m in $mods; do
    modprobe -S "$rel" --show-depends "$m" | while read -r kind path _; do
        [ "$kind" = insmod ] || continue
        base=$(basename "$path")
        grep -qx "$base" "$tmp/modules.order" && continue
        case $path in
            *.ko) cp "$path" "$tmp/lib/modules/$base" ;;
            *.ko.xz) base=${base%.xz}; xz -dc "$path" > "$tmp/lib/modules/$base" ;;
            *.ko.zst) base=${base%.zst}; zstd -qdc "$path" > "$tmp/lib/modules/$base" ;;
            *) echo "vmimage.sh: cannot handle $path" >&2; exit 1 ;;
        esac
        echo "$base" >> "$tmp/modules.order"
    done
done
cp "$init" "$tmp/init"
mkdir -p "$out"
(cd "$tmp" && find . -print | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -1 > "$out/initrd.img.new"
cp "/boot/vmlinuz-$rel" "$out/vmlinuz.new"
mv "$out/initrd.img.new" "$out/initrd.img"
mv "$out/vmlinuz.new" "$out/vmlinuz"
echo "$rel" > "$out/release"
echo "  VM      $out (guest kernel $rel, $(wc -l < "$tmp/modules.order") modules)"
