#!/bin/sh
# fresh-machine-check.sh - run the README's two commands (`make demo`, `make
# test`) on a fresh Debian 12 root, as a new user would on a new machine.
#
# CI's machine already has most of what the project needs, so a green CI can
# hide a missing install step.  This script builds a minimal Debian 12
# (debootstrap bookworm, variant minbase, plus build-essential and git: "a
# minimal Debian with a C toolchain and git"), gives it what every machine of
# this workplace has from its image (CA certificates, npm settings, the CA
# environment variables, DNS), clones the committed project into /root of that
# root, and runs, as root there, exactly:
#
#     cd /root/cellblock && make demo && make test
#
# The root is entered with its own mount and pid namespaces and pivot_root
# (not chroot: the sandbox needs user namespaces, which the kernel refuses to
# a chrooted caller), with /proc, /sys (cgroups included) and /dev from the
# host.  It shares the host's network (apt, npm) and its cgroup hierarchy.
#
# Not part of `make test`: it needs root, the Debian mirror, several GiB of
# disk and 15-30 minutes.  Nothing is installed into the fresh root by hand:
# whatever fails is fixed in the project, then the check is run again.
#
# usage: sh scripts/fresh-machine-check.sh [--rev REV] [--keep] [--shell] [--clean]
#   --rev REV   commit to clone (default HEAD; uncommitted changes are not seen)
#   --keep      keep the used root afterwards (in $CB_FRESH_DIR/root)
#   --shell     open a shell in the fresh root after the commands (implies --keep)
#   --clean     delete $CB_FRESH_DIR entirely (pristine tarball too) and exit
# environment:
#   CB_FRESH_DIR        work dir, outside the repo (default /var/tmp/cellblock-fresh);
#                       the pristine debootstrap root is kept there as a tarball
#                       and reused, so only the first run debootstraps
#   CB_FRESH_MIRROR     Debian mirror (default: the one in /etc/apt/sources.list*)
#   CB_FRESH_APT_CACHE  a directory kept between runs for downloaded .debs
#                       (only saves downloads; every package is still installed
#                       by the project's own set-up)
#   CB_FRESH_MUST_WORK  1: also export CB_MUST_WORK=1 (as CI does), so a test
#                       that skips for lack of something fails instead
#   CB_FRESH_COMMANDS   what to run in the clone (default "make demo; make test")
#
# Exit status: 0 when every command succeeded, 1 otherwise, 2 on bad usage or
# when the root could not be prepared.  The full log is $CB_FRESH_DIR/last.log.
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd)
DIR=${CB_FRESH_DIR:-/var/tmp/cellblock-fresh}
SUITE=bookworm
REV=HEAD
KEEP=0
SHELL_AFTER=0

die() { echo "fresh-machine-check: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case $1 in
        --rev) [ $# -ge 2 ] || die "--rev needs a commit"; REV=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --shell) KEEP=1; SHELL_AFTER=1; shift ;;
        --clean)
            case $DIR in /|/root|/home|/tmp|/var/tmp|"$REPO"*) die "refusing to delete $DIR" ;; esac
            rm -rf --one-file-system "$DIR"; echo "removed $DIR"; exit 0 ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, namespaces, pivot_root)"
# root's home: where this host keeps root's npm config, and where the fresh
# root's root login starts (Debian's /etc/passwd)
ROOT_HOME=$(getent passwd 0 | cut -d: -f6)
ROOT_HOME=${ROOT_HOME:-/root}
case $DIR in "$REPO"|"$REPO"/*) die "CB_FRESH_DIR must be outside the repository" ;; esac
case $DIR in /*) ;; *) die "CB_FRESH_DIR must be an absolute path" ;; esac
for t in unshare pivot_root git tar; do
    command -v "$t" >/dev/null 2>&1 || die "$t not found"
done
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "fresh-machine-check: installing debootstrap on this machine"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
             apt-get install -y -qq --no-install-recommends debootstrap; } \
        || die "cannot install debootstrap"
fi
COMMIT=$(git -C "$REPO" rev-parse --verify "$REV^{commit}") || die "no commit $REV"
if [ "$REV" = HEAD ] && [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no)" ]; then
    echo "fresh-machine-check: note: uncommitted changes in $REPO are not part of the check"
fi

# The mirror this machine uses (deb822 "URIs:" or one-line "deb URI suite").
if [ -z "${CB_FRESH_MIRROR:-}" ]; then
    CB_FRESH_MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
                          /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]*\)\{0,1\}//p' \
        | awk '{print $1}' | grep -E '^https?://[^ ]*/debian/?$' | head -n 1)
    CB_FRESH_MIRROR=${CB_FRESH_MIRROR:-http://deb.debian.org/debian}
fi
MIRROR=${CB_FRESH_MIRROR%/}

mkdir -p "$DIR"
PRISTINE=$DIR/pristine-$SUITE-minbase.tar
ROOT=$DIR/root
LOG=$DIR/last.log
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }

# A root left mounted by an interrupted run cannot be, since every mount lives
# in the namespace that dies with the run; refuse anyway rather than rm -rf
# through a mount.
if grep -q " ${ROOT}[/ ]" /proc/self/mountinfo; then
    die "something is mounted under $ROOT; unmount it first"
fi

# ---- 1. the pristine root: debootstrap once, then a tarball ---------------
if [ ! -f "$PRISTINE" ]; then
    say "== debootstrap $SUITE (minbase + build-essential, git) from $MIRROR"
    rm -rf --one-file-system "$DIR/build"
    start=$(date +%s)
    nice -n 10 debootstrap --variant=minbase --include=build-essential,git \
        "$SUITE" "$DIR/build" "$MIRROR" >>"$LOG" 2>&1 \
        || { tail -n 30 "$LOG"; die "debootstrap failed (log: $LOG)"; }
    # what a Debian 12 installation lists: the release, its updates and security
    cat >"$DIR/build/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $MIRROR-security $SUITE-security main
EOF
    rm -rf "$DIR/build/var/cache/apt/archives/"*.deb "$DIR/build/var/lib/apt/lists/"*_* 2>/dev/null || true
    tar -C "$DIR/build" --numeric-owner -cpf "$PRISTINE.tmp" .
    mv "$PRISTINE.tmp" "$PRISTINE"
    rm -rf --one-file-system "$DIR/build"
    say "   pristine root saved as $PRISTINE ($(( $(date +%s) - start )) s)"
fi

# ---- 2. a fresh copy, with what every machine here has from its image ------
rm -rf --one-file-system "$ROOT"
mkdir -p "$ROOT"
tar -C "$ROOT" --numeric-owner -xpf "$PRISTINE"
# DNS and host names, as on any networked machine
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
[ -f /etc/hosts ] && cp -L /etc/hosts "$ROOT/etc/hosts"
# CA certificates: the bundle the image's environment points to, and the local
# CAs (so that update-ca-certificates, run if a package pulls ca-certificates
# in, keeps them)
mkdir -p "$ROOT/etc/ssl/certs" "$ROOT/usr/local/share/ca-certificates"
[ -f /etc/ssl/certs/ca-certificates.crt ] \
    && cp -L /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
for f in /usr/local/share/ca-certificates/*; do
    [ -e "$f" ] && cp -rL "$f" "$ROOT/usr/local/share/ca-certificates/"
done
# npm settings (global and root's user config), wherever this image keeps them
for f in /etc/npmrc /usr/etc/npmrc /usr/local/etc/npmrc "$ROOT_HOME/.npmrc"; do
    [ -f "$f" ] || continue
    mkdir -p "$ROOT$(dirname "$f")"
    cp -L "$f" "$ROOT$f"
done
# The environment a root login on such a machine has: the standard PATH and
# the image's CA / npm / proxy variables; nothing else of this session's.
ENVFILE=$ROOT/var/tmp/fresh-env
{
    echo "export HOME=$ROOT_HOME USER=root LOGNAME=root SHELL=/bin/sh TERM=xterm"
    echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env | grep -E '^(NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR|GIT_SSL_CAINFO|CURL_CA_BUNDLE|REQUESTS_CA_BUNDLE|PIP_CERT|[Nn][Pp][Mm]_[Cc][Oo][Nn][Ff][Ii][Gg]_[A-Za-z_]*|[Hh][Tt][Tt][Pp][Ss]?_[Pp][Rr][Oo][Xx][Yy]|[Nn][Oo]_[Pp][Rr][Oo][Xx][Yy])=' \
        | sed "s/'/'\\\\''/g; s/^\([^=]*\)=\(.*\)\$/export \1='\2'/" || true
    if [ "${CB_FRESH_MUST_WORK:-}" = 1 ]; then echo "export CB_MUST_WORK=1"; fi
} >"$ENVFILE"

# The project, as a user gets it: `git clone` of the repository.  A worktree's
# .git only points into another repository, so the commit travels as a bundle
# of HEAD and its branch (or of the ref given with --rev).
if [ "$REV" = HEAD ]; then
    BRANCH=$(git -C "$REPO" symbolic-ref -q --short HEAD || true)
    set -- HEAD ${BRANCH:+"$BRANCH"}
else
    set -- "$REV"
fi
git -C "$REPO" bundle create "$ROOT/var/tmp/cellblock.bundle" "$@" >>"$LOG" 2>&1 \
    || die "git bundle create $* failed (--rev takes a branch or tag name)"

APT_CACHE=${CB_FRESH_APT_CACHE:-}
if [ -n "$APT_CACHE" ]; then
    mkdir -p "$APT_CACHE/partial"
fi

# A cgroup of its own in each cgroup v1 hierarchy cellblock uses.  The fresh
# root has its own pid namespace but shares this machine's cgroup tree, and
# the launcher names its cgroup after its pid (cellblock-<pid>): without this,
# a launcher in the fresh root and one on the host (another session's tests)
# with the same pid number would share, and then kill, one cgroup.  Whatever
# is left in it afterwards is a leak the summary reports.
CG_NAME=cbfresh-$$
CG_DIRS=""
for ctrl in memory pids cpu freezer; do
    mnt=$(awk -v c="$ctrl" '/ - cgroup cgroup / { n = split($NF, o, ",");
              for (i = 1; i <= n; i++) if (o[i] == c) { print $5; exit } }' /proc/self/mountinfo)
    [ -n "$mnt" ] || continue
    own=$(awk -F: -v c="$ctrl" '{ n = split($2, o, ",");
              for (i = 1; i <= n; i++) if (o[i] == c) { print $3; exit } }' /proc/self/cgroup)
    d=$mnt${own%/}/$CG_NAME
    case " $CG_DIRS " in *" $d "*) continue ;; esac
    mkdir "$d" 2>/dev/null || continue
    CG_DIRS="$CG_DIRS $d"
    # one group competes like one nice-0 task: give it the weight of nice 10
    [ "$ctrl" != cpu ] || echo 110 >"$d/cpu.shares" 2>/dev/null || true
done
# shellcheck disable=SC2317 # called from the trap and once after the run
cg_cleanup() {
    for d in $CG_DIRS; do
        [ -d "$d" ] || continue
        left=$(find "$d" -mindepth 1 -type d 2>/dev/null)
        [ -z "$left" ] || say "== LEFT BEHIND in the check's cgroup: $left"
        for _ in 1 2 3 4 5 6 7 8 9 10; do   # the namespace's last tasks may still be exiting
            find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
            [ -d "$d" ] || break
            sleep 1
        done
    done
}
trap cg_cleanup EXIT

# ---- 3. the commands, inside the fresh root ---------------------------------
COMMANDS=${CB_FRESH_COMMANDS:-make demo; make test}
cat >"$ROOT/var/tmp/fresh-run.sh" <<EOF
#!/bin/sh
# runs inside the fresh root, as root, with a login's environment
cd /root
echo "== git clone (commit $COMMIT)"
git clone -q /var/tmp/cellblock.bundle cellblock || exit 2
[ "\$(git -C cellblock rev-parse HEAD)" = $COMMIT ] || git -C cellblock checkout -q $COMMIT || exit 2
cd cellblock
status=0
IFS=';'
for c in \$CB_FRESH_CMDS; do
    c=\$(echo "\$c" | sed 's/^ *//; s/ *\$//')
    [ -n "\$c" ] || continue
    echo "== \$c"
    t0=\$(date +%s)
    sh -c "\$c"
    rc=\$?
    echo "== \$c: exit \$rc, \$(( \$(date +%s) - t0 )) s"
    [ \$rc = 0 ] || status=1
done
exit \$status
EOF

# Inside unshare: pid 1 of a new pid namespace with a private mount namespace.
# The root becomes a mount point (bind onto itself) so pivot_root accepts it.
# shellcheck disable=SC2016 # expanded by the inner shell
ENTER='
set -eu
R=$1; shift
for d in $CB_FRESH_CGROUPS; do echo $$ >"$d/cgroup.procs"; done
mount --bind "$R" "$R"
mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --rbind /dev "$R/dev"
mount -t tmpfs -o nosuid,nodev,mode=755 tmpfs "$R/run"
if [ -n "$CB_FRESH_APT_CACHE_DIR" ]; then
    mount --bind "$CB_FRESH_APT_CACHE_DIR" "$R/var/cache/apt/archives"
fi
cd "$R"
mkdir -p .old-root
pivot_root . .old-root
cd /
umount -l /.old-root
rmdir /.old-root
exec /usr/sbin/chroot / "$@"
'

say "== fresh root: $ROOT (commit $(git -C "$REPO" log -1 --format='%h %s' "$COMMIT"))"
start=$(date +%s)
logsize=$(wc -c <"$LOG")
CB_FRESH_APT_CACHE_DIR=$APT_CACHE CB_FRESH_CGROUPS=$CG_DIRS \
nice -n 10 unshare --mount --pid --fork --propagation private /bin/sh -c "$ENTER" enter "$ROOT" \
    /usr/bin/env -i CB_FRESH_CMDS="$COMMANDS" /bin/sh -c '. /var/tmp/fresh-env; exec /bin/sh /var/tmp/fresh-run.sh' \
    >>"$LOG" 2>&1 &
runpid=$!
tail -c "+$((logsize + 1))" --pid=$runpid -f "$LOG" 2>/dev/null || true
status=0
wait $runpid || status=1
cg_cleanup
say "== total $(( $(date +%s) - start )) s, exit $status"
echo "== summary"
grep -E '^== [^:]+: exit|^=* *[0-9]+ (passed|failed|errors?|skipped).* in [0-9.]+s|^== total|^== LEFT' "$LOG" || true

if [ "$SHELL_AFTER" = 1 ]; then
    CB_FRESH_APT_CACHE_DIR=$APT_CACHE CB_FRESH_CGROUPS=$CG_DIRS unshare --mount --pid --fork --propagation private /bin/sh -c "$ENTER" enter "$ROOT" \
        /usr/bin/env -i /bin/sh -c '. /var/tmp/fresh-env; cd /root; exec /bin/bash -i' 
fi
if [ "$KEEP" = 0 ]; then
    rm -rf --one-file-system "$ROOT"
else
    say "== kept $ROOT (delete with: rm -rf --one-file-system $ROOT)"
fi
exit $status
