# vmkernel.sh - what the micro-VM's image (scripts/vmimage.sh) and the test
# guest's (scripts/guestimage.sh) share: which installed Debian kernel boots
# a guest, and copying modules with their dependencies into an initramfs tree.
# Sourced (POSIX sh), not run.

# vm_release: the newest installed generic kernel that has 9p (the cloud
# flavour does not), with its modules; "" when there is none.
vm_release() {
    _rel=""
    for _f in $(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | sort -V); do
        _r=${_f#/boot/vmlinuz-}
        case $_r in *cloud*) continue ;; esac
        [ -r "$_f" ] && [ -d "/lib/modules/$_r" ] && _rel=$_r
    done
    echo "$_rel"
}

# vm_modules REL TREE MODULE...: each module and what it depends on, in load
# order, decompressed into TREE/lib/modules/, their names in TREE/modules.order.
vm_modules() {
    _rel=$1 _tree=$2
    shift 2
    mkdir -p "$_tree/lib/modules"
    : > "$_tree/modules.order"
    for _m in "$@"; do
        modprobe -S "$_rel" --show-depends "$_m" | while read -r _kind _path _; do
            [ "$_kind" = insmod ] || continue
            _base=$(basename "$_path")
            case $_path in
                *.ko) ;;
                *.ko.xz) _base=${_base%.xz} ;;
                *.ko.zst) _base=${_base%.zst} ;;
                *) echo "vmkernel.sh: cannot handle $_path" >&2; exit 1 ;;
            esac
            grep -qx "$_base" "$_tree/modules.order" && continue
            case $_path in
                *.ko) cp "$_path" "$_tree/lib/modules/$_base" ;;
                *.ko.xz) xz -dc "$_path" > "$_tree/lib/modules/$_base" ;;
                *.ko.zst) zstd -qdc "$_path" > "$_tree/lib/modules/$_base" ;;
            esac
            echo "$_base" >> "$_tree/modules.order"
        done
    done
}

# vm_fresh OUT REL FILE...: OUT already holds REL's image, newer than every FILE.
vm_fresh() {
    _out=$1 _rel=$2
    shift 2
    [ -f "$_out/release" ] && [ "$(cat "$_out/release")" = "$_rel" ] || return 1
    for _f in "$@" "$(dirname "$0")/vmkernel.sh"; do
        [ "$_out/initrd.img" -nt "$_f" ] || return 1
    done
}

# vm_install TREE OUT REL: TREE as OUT/initrd.img (a gzipped newc cpio, owned by
# root, in a stable order), REL's kernel as OUT/vmlinuz, REL in OUT/release.
vm_install() {
    mkdir -p "$2"
    (cd "$1" && find . -print | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) |
        gzip -1 > "$2/initrd.img.new"
    cp "/boot/vmlinuz-$3" "$2/vmlinuz.new"
    mv "$2/initrd.img.new" "$2/initrd.img"
    mv "$2/vmlinuz.new" "$2/vmlinuz"
    echo "$3" > "$2/release"
}
