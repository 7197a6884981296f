"""cellblock runner: the small IPython-syntax subset (see docs/MAGICS.md).

transform() rewrites, line for line (line numbers are kept), the lines that
start a logical line with `!`, `%` or `%%` (first line only) into calls of
the private builtin `__cellblock__`, whose attributes are the m_* functions
below.  Text inside string literals, brackets and continuation lines is
never touched.  help_request() turns `obj?`, `obj??`, `?obj` cells into a
page payload.
"""

import sys
import os

_runner = sys.modules["_cellblock_runner"]


class UsageError(Exception):
    """Bad use of a magic (IPython's UsageError)."""


UsageError.__module__ = "builtins"


# ------------------------------------------------------------------ help


def help_request(code):
    """`name?`, `name??`, `?name`, `??name` alone in a cell -> page payload."""
    s = code.strip()
    if "\n" in s or "?" not in s:
        return None
    detail = False
    if s.endswith("??") or s.startswith("??"):
        detail = True
    name = s.strip("?").strip()
    if not name or not all(p.isidentifier() for p in name.split(".")):
        return None
    if not (s.endswith("?") or s.startswith("?")):
        return None
    assist = _runner._mod("cb_assist")
    text = assist.page(name, detail, _runner._S.user.__dict__)
    if text is None:
        text = "Object `%s` not found." % name
    return {"source": "page", "data": {"text/plain": text}, "start": 0}


# ------------------------------------------------------------------ transform


def _scan(line, state):
    """Advance the lexical state over one source line.

    state: [open string quote or None, bracket depth]; returns whether the
    line ends with a backslash continuation.
    """
    quote, depth = state
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if line.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
            i += 1
            continue
        if c == "#":
            break
        if c in "'\"":
            if line.startswith(c * 3, i):
                quote = c * 3
                i += 3
            else:
                quote = c
                i += 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        i += 1
    if quote and len(quote) == 1 and not line.endswith("\\"):
        quote = None            # unterminated short string: a syntax error anyway
    state[0], state[1] = quote, depth
    return line.endswith("\\") and not line.endswith("\\\\")


def _assign_target(s):
    """`x = !cmd` / `x = %magic` -> (target, rest) or None."""
    eq = s.find("=")
    if eq <= 0:
        return None
    target, rest = s[:eq].strip(), s[eq + 1:].lstrip()
    if not rest[:1] in ("!", "%") or rest.startswith("%%"):
        return None
    if not all(p.strip().isidentifier() for p in target.replace(",", ".").split(".")):
        return None
    return target, rest


def transform(code, check=False):
    """Rewrite IPython syntax into plain Python with the same line numbers.

    check=True (is_complete) replaces the magic lines by `pass`-like calls
    without validating them.
    """
    lines = code.split("\n")
    # cell magic: %%name args on the first line
    first = lines[0]
    if first.startswith("%%"):
        name, _, args = first[2:].partition(" ")
        body = "\n".join(lines[1:])
        return "__cellblock__.cell(%r, %r, %r)" % (name.strip(), args.strip(), body) + "\n" * (
            len(lines) - 1)
    state = [None, 0]
    cont = False
    out = []
    for line in lines:
        if state[0] is None and state[1] == 0 and not cont:
            stripped = line.lstrip()
            indent = line[:len(line) - len(stripped)]
            new = None
            if stripped.startswith("!"):
                new = "__cellblock__.system(%r)" % stripped[1:]
            elif stripped.startswith("%") and not stripped.startswith("%%"):
                name, _, args = stripped[1:].partition(" ")
                new = "__cellblock__.line(%r, %r)" % (name, args.strip())
            else:
                a = _assign_target(stripped)
                if a is not None:
                    target, rest = a
                    if rest.startswith("!"):
                        new = "%s = __cellblock__.getoutput(%r)" % (target, rest[1:])
                    else:
                        name, _, args = rest[1:].partition(" ")
                        new = "%s = __cellblock__.line(%r, %r)" % (target, name, args.strip())
            if new is not None:
                out.append(indent + new)
                continue
        cont = _scan(line, state)
        out.append(line)
    return "\n".join(out)


# ------------------------------------------------------------------ runtime


def _caller_ns():
    f = sys._getframe(2)
    return f.f_globals, f.f_locals


def m_system(cmd):
    """!cmd: run with /bin/sh -c, output straight to fd 1/2."""
    import subprocess
    _runner._flush()
    rc = subprocess.call(["/bin/sh", "-c", cmd], stdin=subprocess.DEVNULL)
    _runner._flush()
    return None if rc == 0 else None


def m_getoutput(cmd):
    """x = !cmd: the command's output as a list of lines."""
    import subprocess
    _runner._flush()
    p = subprocess.run(["/bin/sh", "-c", cmd], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.stdout.decode("utf-8", "replace").splitlines()


def m_line(name, args):
    fn = _LINE.get(name)
    if fn is None:
        raise UsageError("Line magic function `%%%s` not found." % name)
    g, l = _caller_ns()
    return fn(args, g, l)


def m_cell(name, args, body):
    fn = _CELL.get(name)
    if fn is None:
        raise UsageError("Cell magic `%%%%%s` not found." % name)
    g, l = _caller_ns()
    return fn(args, body, g, l)


def _compile_snippet(src, g, mode=None):
    """Compile user text as (body, last-expression) with the cell's filename."""
    filename = _runner._cell_filename(src)
    _runner._S.cell_counts[filename] = _runner._S.count
    return _runner._compile_cell(src, filename)


def _run_snippet(src, g, l):
    if _runner._needs_transform(src):
        src = transform(src)
    body, expr = _compile_snippet(src, g)
    _runner._run_code(body, g, l if l is not g else None)
    if expr is not None:
        return _runner._run_code(expr, g, l if l is not g else None)
    return None


def _fmt_time(t):
    """Like IPython's _format_time (3 significant digits)."""
    if t >= 60.0:
        m, s = divmod(t, 60.0)
        if m >= 60:
            h, m = divmod(m, 60)
            return "%dh %dmin %ds" % (h, m, s)
        return "%dmin %ds" % (m, s)
    units = ["s", "ms", "\xb5s", "ns"]
    scale = [1.0, 1e3, 1e6, 1e9]
    order = 3
    if t > 0.0:
        import math
        order = min(-int(math.floor(math.log10(t)) // 3), 3)
    order = max(order, 0)
    return "%.*g %s" % (3, t * scale[order], units[order])


def _time(args, g, l, body=None):
    import time
    src = args if body is None else body
    t0 = time.perf_counter()
    r0 = os.times()
    try:
        return _run_snippet(src, g, l)
    finally:
        r1 = os.times()
        wall = time.perf_counter() - t0
        user, system = r1.user - r0.user, r1.system - r0.system
        print("CPU times: user %s, sys: %s, total: %s" % (
            _fmt_time(user), _fmt_time(system), _fmt_time(user + system)))
        print("Wall time: %s" % _fmt_time(wall))


def _timeit(args, g, l, body=None):
    import timeit
    import math
    import re
    number, repeat = 0, 7
    quiet = False
    # leading options, attached or not: -n 10, -n10, -r 3, -r3, -q (as IPython)
    opt = re.compile(r"\s*-(?:([nr])\s*(\d+)|(q))(?=\s|$)")
    pos = 0
    while True:
        m = opt.match(args, pos)
        if m is None:
            break
        if m.group(1) == "n":
            number = int(m.group(2))
        elif m.group(1) == "r":
            repeat = max(1, int(m.group(2)))
        else:
            quiet = True
        pos = m.end()
    if body is None:
        stmt, setup = args[pos:].strip(), "pass"
    else:
        stmt, setup = body, (args[pos:].strip() or "pass")
    if not stmt.strip():
        raise UsageError("%timeit needs a statement")
    ns = dict(g)
    if l is not g and l is not None:
        ns.update(l)
    timer = timeit.Timer(stmt, setup, globals=ns)
    if number == 0:
        number = 1
        for k in range(1, 10):
            number = 10 ** k // 10 or 1
            t = timer.timeit(number)
            if t >= 0.2:
                break
    runs = [t / number for t in timer.repeat(repeat, number)]
    mean = sum(runs) / len(runs)
    std = math.sqrt(sum((x - mean) ** 2 for x in runs) / len(runs))
    if not quiet:
        print("%s \xb1 %s per loop (mean \xb1 std. dev. of %d run%s, %s loop%s each)" % (
            _fmt_time(mean), _fmt_time(std), repeat, "" if repeat == 1 else "s",
            format(number, ","), "" if number == 1 else "s"))
    return None


def _matplotlib(args, g, l):
    return None


def _pwd(args, g, l):
    return os.getcwd()


def _cd(args, g, l):
    target = os.path.expanduser(args.strip().strip("'\"") or "~")
    try:
        os.chdir(target)
    except OSError as e:
        raise UsageError("%s: %s" % (e.strerror, target)) from None
    print(os.getcwd())


def pip_failure_note(line, rc):
    """Why a `%pip install/download` in the sandbox failed, or None: a system
    Python (PEP 668), or a sandbox without a route to a package index (both
    shells' %pip say it)."""
    import shlex
    import sysconfig
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    managed = (os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
               and sys.prefix == sys.base_prefix)
    escape = {"--break-system-packages", "--target", "-t", "--prefix", "--root"}
    if words[:1] == ["install"] and managed and not escape.intersection(words):
        return ("\ncellblock: pip refused (exit code %d): this Python is externally managed "
                "(PEP 668, e.g. Debian's system Python), so packages cannot be installed into "
                "it. Use a Python in a virtual environment for the sandbox (--python), or "
                "--target DIR. Note also that the sandbox has no network access unless the "
                "kernel was started with --network host or --network allow:HOSTS." % rc)
    if words[:1] in (["install"], ["download"]) and os.environ.get("CELLBLOCK_NETWORK_ALLOW"):
        return ("\ncellblock: pip failed (exit code %d). The sandbox reaches only the hosts of "
                "its allowlist (%s), through the kernel's proxy; the kernel's log says what it "
                "refused." % (rc, os.environ["CELLBLOCK_NETWORK_ALLOW"]))
    if words[:1] in (["install"], ["download"]):
        return ("\ncellblock: pip failed (exit code %d). The sandbox has no network access "
                "unless the kernel was started with --network host or --network allow:HOSTS, "
                "so packages cannot be downloaded from an index." % rc)
    return None


def _pip(args, g, l):
    import subprocess
    import shlex
    _runner._flush()
    argv = [sys.executable, "-m", "pip"] + shlex.split(args)
    rc = subprocess.call(argv, stdin=subprocess.DEVNULL)
    _runner._flush()
    if rc != 0:
        print(pip_failure_note(args, rc) or "cellblock: pip exited with code %d" % rc,
              file=sys.stderr)
    else:
        print("Note: you may need to restart the kernel to use updated packages.")


def _env(args, g, l):
    a = args.strip()
    if not a:
        return dict(os.environ)
    if "=" in a:
        k, _, v = a.partition("=")
    elif " " in a:
        k, _, v = a.partition(" ")
    else:
        if a not in os.environ:
            raise UsageError("Environment does not have key: " + a)
        return os.environ[a]
    os.environ[k.strip()] = v.strip()
    print("env: %s=%s" % (k.strip(), v.strip()))


def _cell_writefile(args, body, g, l):
    import shlex
    words = shlex.split(args)
    append = "-a" in words or "--append" in words
    files = [w for w in words if not w.startswith("-")]
    if len(files) != 1:
        raise UsageError("%%writefile needs exactly one file name")
    path = os.path.expanduser(files[0])
    exists = os.path.exists(path)
    with open(path, "a" if append else "w", encoding="utf-8") as f:
        f.write(body + ("" if body.endswith("\n") or not body else "\n"))
    print("%s %s" % ("Appending to" if append else ("Overwriting" if exists else "Writing"),
                     files[0]))


def _cell_sh(shell):
    def run(args, body, g, l):
        import subprocess
        _runner._flush()
        subprocess.run([shell], input=body.encode("utf-8"))
        _runner._flush()
    return run


def _snap(which):
    def run(args, g, l):
        _runner._mod("cb_snap").magic(which, args, UsageError)
    return run


_LINE = {
    "checkpoint": _snap("checkpoint"),
    "rollback": _snap("rollback"),
    "checkpoints": _snap("checkpoints"),
    "time": _time,
    "timeit": _timeit,
    "matplotlib": _matplotlib,
    "pwd": _pwd,
    "cd": _cd,
    "pip": _pip,
    "env": _env,
}

_CELL = {
    # the leading newline keeps the body's line numbers those of the cell
    "time": lambda args, body, g, l: _time(args, g, l, "\n" + body),
    "timeit": lambda args, body, g, l: _timeit(args, g, l, body),
    "writefile": _cell_writefile,
    "sh": _cell_sh("/bin/sh"),
    "bash": _cell_sh("/bin/bash"),
}
