#!/bin/sh
# run.sh - runs the libFuzzer harnesses of fuzz/ (see fuzz/README.md).
#
#   sh fuzz/run.sh smoke SECONDS BUILD TARGET...
#       replays every saved input of fuzz/corpus/TARGET/ (seeds and the
#       regression inputs of every finding), then fuzzes for SECONDS from
#       them into a throw-away corpus.  `make fuzz-smoke`, part of `make test`.
#   sh fuzz/run.sh long SECONDS BUILD TARGET...
#       fuzzes for SECONDS, growing BUILD/corpus/TARGET/ (kept between runs,
#       never committed).  `make fuzz`.
#   sh fuzz/run.sh merge 0 BUILD TARGET...
#       adds to fuzz/corpus/TARGET/ the inputs of BUILD/corpus/TARGET/ that
#       bring new coverage (libFuzzer -merge=1).  `make fuzz-merge`.
#
# LeakSanitizer is on: a leak fails the run like a crash.  A failing input is
# left in BUILD/findings/; make it a regression test by fixing the bug and
# copying the input to fuzz/corpus/TARGET/regress-<what>.  Each harness gets
# its own scratch directory on tmpfs (FUZZ_TMP), removed when it ends, so a
# crash leaves no temporary tree behind.  Prints one line per harness:
# inputs replayed, runs, exec/s, coverage, new inputs.
set -eu
mode=$1 secs=$2 build=$3
shift 3
targets="$*"
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$build/findings" "$build/logs"
tmpbase=/tmp
[ -w /dev/shm ] && tmpbase=/dev/shm
# detect_leaks is libFuzzer's default under ASan; said here so an
# ASAN_OPTIONS from the caller's environment (pytest runs with leaks off)
# cannot turn it off.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:symbolize=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# readable stacks: Debian's llvm-14 ships llvm-symbolizer under its own name
if ! command -v llvm-symbolizer >/dev/null 2>&1 && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
    export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
unset FUZZ_LOG
failed=""
summary="$build/fuzz-$mode.txt"
: > "$summary"

stat() { # name, log
    sed -n "s/^stat::$1: *//p" "$2" | tail -n 1
}

for t in "$@"; do
    bin="$build/fuzz_$t"
    seeds="$here/corpus/$t"
    dict="$here/dict/$t.dict"
    log="$build/logs/$t-$mode.log"
    mkdir -p "$seeds"
    FUZZ_TMP=$(mktemp -d "$tmpbase/cb-fuzz-$t.XXXXXX")
    export FUZZ_TMP
    set -- -print_final_stats=1 -timeout=20 -artifact_prefix="$build/findings/$t-"
    [ -f "$dict" ] && set -- "$@" -dict="$dict"
    rc=0
    : > "$log"
    nseeds=$(find "$seeds" -type f | wc -l)
    case $mode in
    smoke)
        if [ "$nseeds" -gt 0 ]; then
            # every saved input, one run each: regressions fail here
            find "$seeds" -type f -print0 | xargs -0 "$bin" -timeout=20 \
                -artifact_prefix="$build/findings/$t-" >> "$log" 2>&1 || rc=$?
        fi
        if [ "$rc" = 0 ]; then
            mkdir -p "$FUZZ_TMP/corpus"
            "$bin" "$@" -max_total_time="$secs" "$FUZZ_TMP/corpus" "$seeds" >> "$log" 2>&1 || rc=$?
        fi
        ;;
    long)
        mkdir -p "$build/corpus/$t"
        "$bin" "$@" -max_total_time="$secs" "$build/corpus/$t" "$seeds" >> "$log" 2>&1 || rc=$?
        ;;
    merge)
        mkdir -p "$build/corpus/$t"
        "$bin" -merge=1 "$seeds" "$build/corpus/$t" >> "$log" 2>&1 || rc=$?
        ;;
    *) echo "run.sh: unknown mode $mode" >&2; exit 2 ;;
    esac
    rm -rf "$FUZZ_TMP"
    runs=$(stat number_of_executed_units "$log")
    eps=$(stat average_exec_per_sec "$log")
    new=$(stat new_units_added "$log")
    cov=$(sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/cov \1, features \2, corpus \3/p' "$log" | tail -n 1)
    line=$(printf 'fuzz %-9s %-5s %4s saved inputs, %s runs, %s exec/s, %s, %s new' \
        "$t" "$mode" "$nseeds" "${runs:-0}" "${eps:-0}" "${cov:-no stats}" "${new:-0}")
    if [ "$rc" != 0 ]; then
        line="$line: FAILED (exit $rc, log $log)"
        failed="$failed $t"
        echo "----- $t: last lines of $log" >&2
        grep -E 'ERROR|SUMMARY|property broken|Test unit written|leak' "$log" | tail -n 20 >&2 || true
        tail -n 40 "$log" >&2
    fi
    echo "$line"
    echo "$line" >> "$summary"
done
if [ -n "$failed" ]; then
    echo "fuzz-$mode: failed:$failed (inputs in $build/findings/)"
    exit 1
fi
echo "fuzz-$mode: every harness clean ($targets)"
