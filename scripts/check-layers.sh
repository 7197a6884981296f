#!/bin/sh
# check-layers.sh - DESIGN.md's dependency direction, for #include lines:
# kernel -> launcher, artifacts -> isolate; isolate depends on nothing above
# it.  (The link order of the per-folder archives checks the same for
# symbols.)  Every project include names its folder ("isolate/log.h"), and
# no project header shares a system header's name.  Exits 1 and names each
# offending line.
set -eu
bad=0
check() { # folder, allowed project folders (regex)
    for f in "$1"/*.c "$1"/*.h; do
        [ -e "$f" ] || continue
        grep -n '^#include "' "$f" | while IFS= read -r line; do
            inc=$(printf '%s' "$line" | sed 's/.*#include "\([^"]*\)".*/\1/')
            case "$inc" in
            */*) dir=${inc%%/*} ;;
            *)
                echo "check-layers: $f:${line%%:*}: write the folder: \"<folder>/$inc\""
                echo x >> "$tmp"
                continue
                ;;
            esac
            if ! printf '%s' "$dir" | grep -Eq "^($2)$"; then
                echo "check-layers: $f:${line%%:*}: $1/ must not include $inc"
                echo x >> "$tmp"
            fi
        done
    done
}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
check isolate 'isolate'
check artifacts 'artifacts|isolate'
check launcher 'launcher|isolate'
check kernel 'kernel|launcher|artifacts|isolate'
check proxy 'proxy|launcher|isolate'
check vm 'vm|launcher|isolate'
# no header of ours may share a system header's name (isolate/limits.h did)
for h in isolate/*.h artifacts/*.h launcher/*.h kernel/*.h proxy/*.h vm/*.h; do
    [ -e "$h" ] || continue
    if [ -e "/usr/include/$(basename "$h")" ]; then
        echo "check-layers: $h has the name of a system header (/usr/include/$(basename "$h"))"
        echo x >> "$tmp"
    fi
done
[ -s "$tmp" ] && bad=1
[ "$bad" = 0 ] && echo "check-layers: includes follow DESIGN.md's layers"
exit "$bad"
