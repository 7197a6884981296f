#!/bin/sh
# check-layers.sh - the dependency direction of docs/ARCHITECTURE.md
# ("Folders and what each module owns", "The kernel's layers"), for
# #include lines and, once they are built, the kernel's objects:
#   - each folder includes only itself and the folders below it: isolate/
#     nothing else; artifacts/ isolate/; tiers/ isolate/ and, of launcher/,
#     only the headers in TIERS_LAUNCHER_H (the option struct); launcher/
#     tiers/ and isolate/; proxy/ launcher/ and isolate/; kernel/ launcher/,
#     artifacts/ and isolate/.  (The link order of the per-folder archives
#     checks the same for symbols.)
#   - inside kernel/: the server below dispatch below relay, and the session
#     driver (session*.c) below relay and dispatch: no include upward, and
#     no call upward in server.o and dispatch.o;
#   - every project include names its folder ("isolate/log.h"), and no
#     project header shares a system header's name.
# Exits 1 and names each offending line.
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
check launcher 'launcher|tiers|isolate'
check kernel 'kernel|launcher|artifacts|isolate'
check proxy 'proxy|launcher|isolate'
check tiers 'tiers|launcher|isolate'
# Tiers use the launcher's option struct and call nothing in launcher/:
# these are the launcher headers they may include.
TIERS_LAUNCHER_H='launcher/options.h'
for f in tiers/*.c tiers/*.h; do
    [ -e "$f" ] || continue
    grep -n '^#include "launcher/' "$f" | while IFS= read -r line; do
        inc=$(printf '%s' "$line" | sed 's/.*#include "\([^"]*\)".*/\1/')
        case " $TIERS_LAUNCHER_H " in
        *" $inc "*) ;;
        *)
            echo "check-layers: $f:${line%%:*}: tiers/ may include only $TIERS_LAUNCHER_H of launcher/, not $inc"
            echo x >> "$tmp"
            ;;
        esac
    done
done
# Inside kernel/ the protocol core is layered (kernel/core.h): server below
# dispatch below relay, calls upward only through callbacks registered at
# start.  The server's files include none of the layers above it (nor the
# session), dispatch.c does not include relay.h.
layer() { # file, forbidden include (regex), why
    [ -e "$1" ] || return 0
    grep -nE "^#include \"($2)\"" "$1" | while IFS= read -r line; do
        echo "check-layers: $1:${line%%:*}: ${line#*:} $3"
        echo x >> "$tmp"
    done
}
for f in kernel/server.c kernel/server.h; do
    layer "$f" 'kernel/(core|dispatch|relay|session|kernel)\.h' \
        '(the server is the bottom layer: it calls up only through cb_server_cbs_t)'
done
layer kernel/dispatch.c 'kernel/relay\.h' '(dispatch calls relay only through k->up)'
# The session driver is below relay and dispatch: it reports up through the
# callbacks of cb_session_cbs_t.
for f in kernel/session*.c kernel/session*.h; do
    layer "$f" 'kernel/(relay|dispatch)\.h' \
        '(the session driver calls up only through cb_session_cbs_t)'
done
# ... and for symbols, when the objects are built: a prototype written by
# hand instead of an include is caught here.
obj=${BUILD:-build}/obj/kernel
undef() { # object, forbidden symbol prefix (regex), why
    [ -e "$1" ] || return 0
    nm -u "$1" | awk '{print $NF}' | grep -E "^($2)" | while IFS= read -r sym; do
        echo "check-layers: $1 calls $sym $3"
        echo x >> "$tmp"
    done
}
undef "$obj/server.o" 'cb_(dispatch|relay|session|kernel)_' '(server.c is below them)'
undef "$obj/dispatch.o" 'cb_relay_' '(dispatch.c is below relay.c)'
# no header of ours may share a system header's name (isolate/limits.h did)
for h in isolate/*.h artifacts/*.h launcher/*.h tiers/*.h kernel/*.h proxy/*.h; do
    [ -e "$h" ] || continue
    if [ -e "/usr/include/$(basename "$h")" ]; then
        echo "check-layers: $h has the name of a system header (/usr/include/$(basename "$h"))"
        echo x >> "$tmp"
    fi
done
[ -s "$tmp" ] && bad=1
[ "$bad" = 0 ] && echo "check-layers: includes follow docs/ARCHITECTURE.md's layers"
exit "$bad"
