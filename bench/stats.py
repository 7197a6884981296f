"""Small statistics and formatting helpers for the benchmark (stdlib only)."""

import math


def pct(xs, p):
    """Nearest-rank percentile (p in 0..100); None for no data."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    k = max(1, int(math.ceil(p / 100.0 * len(xs))))
    return xs[k - 1]


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2.0


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_num(v, unit):
    """Formats v (seconds, KiB, MiB/s, 1/s or a plain count) for a table."""
    if v is None:
        return "—"
    if unit == "s":
        if v < 0.001:
            return "%.0f µs" % (v * 1e6)
        if v < 1:
            return "%.1f ms" % (v * 1e3) if v < 0.1 else "%.0f ms" % (v * 1e3)
        return "%.2f s" % v
    if unit == "KiB":
        return "%.1f MiB" % (v / 1024.0)
    if unit == "MiB/s":
        return "%.1f MiB/s" % v
    if unit == "/s":
        return "%.0f /s" % v
    return "%g" % v


def fmt_ratio(r):
    if r is None:
        return "—"
    if r < 0.1:
        return "%.3f" % r
    return "%.2f" % r


def write_section(path, name, text):
    """Put `text` between <!-- name:begin --> and <!-- name:end --> in the
    markdown file `path`, replacing what those markers held and keeping the
    rest of the file (other benchmarks' sections, hand-written analysis).
    A file without the markers gets the section appended."""
    begin, end = "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name
    block = begin + "\n" + text.strip("\n") + "\n" + end + "\n"
    try:
        with open(path) as f:
            cur = f.read()
    except FileNotFoundError:
        cur = ""
    if begin in cur and end in cur:
        a = cur.index(begin)
        b = cur.index(end) + len(end)
        if cur[b:b + 1] == "\n":
            b += 1
        cur = cur[:a] + block + cur[b:]
    else:
        cur = (cur.rstrip("\n") + "\n\n" if cur else "") + block
    with open(path, "w") as f:
        f.write(cur)


def publish(text, path, name, log):
    """Prints a report and, when path is given, puts it in path's section."""
    print(text, flush=True)
    if path:
        write_section(path, name, text)
        log("wrote", path)
