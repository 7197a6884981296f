#!/bin/sh
# mplcache.sh PYTHON DIR - build matplotlib's font list into DIR once, for
# the runner to seed each fresh sandbox with. Without matplotlib: nothing.
# HOME points nowhere so only system fonts (the ones a sandbox sees) count.
set -u
py=$1
dir=$2
rm -rf "$dir"
"$py" -c 'import matplotlib' 2>/dev/null || exit 0
mkdir -p "$dir"
HOME=/nonexistent MPLCONFIGDIR="$dir" XDG_DATA_HOME=/nonexistent \
    "$py" -c 'import matplotlib.font_manager' >/dev/null 2>&1 || rm -rf "$dir"
exit 0
