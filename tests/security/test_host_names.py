"""Names the sandbox picks, on the host (issue 18, finding 1).

A cell names its files; `cellblock run --out DIR` creates them on the host
and cellblock's own lines ("saved DIR/NAME", "not saving 'NAME'") and the
kernel's log show those names.  Names with a C0, DEL or C1 control, a
bidirectional-text control or invalid UTF-8 are refused with a reason, and
nothing cellblock prints carries such a character raw: it is escaped as
`ls -b` does.  (The program's own output reaching the terminal raw is
expected, as with `python3 script.py`; these scripts print nothing.)

cellblock only: a stock ipykernel has no `run --out` and no host-side names.
"""

import os
import re
import shutil
import subprocess
import tempfile

from .conftest import BUILD, _check_available
from .hostile_kit import RAW

CELLBLOCK = os.path.join(BUILD, "bin", "cellblock")

# (name the cell writes, what cellblock must print for it)
BAD = [
    ("invoice\u202efdp.csv", r"invoice\342\200\256fdp.csv"),     # shows as "invoicevsc.pdf"
    ("iso\u2066x\u2069.csv", r"iso\342\201\246x\342\201\251.csv"),
    ("lrm\u200e.csv", r"lrm\342\200\216.csv"),
    ("csi\u009b2J.csv", r"csi\302\2332J.csv"),                    # C1 CSI: clears some terminals
    ("nel\u0085.csv", r"nel\302\205.csv"),
    ("del\x7f.csv", r"del\177.csv"),
    ("esc\x1b[2J.csv", r"esc\033[2J.csv"),
    ("tab\there.csv", r"tab\there.csv"),
]
# what may never appear raw in anything cellblock itself writes
RAW_BAD = re.compile("[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _run_out(script, out):
    return subprocess.run([CELLBLOCK, "run", "--log-level", "info", "--out", out, "-"],
                          input=script.encode(), capture_output=True, timeout=120)


def test_run_out_refuses_control_and_bidi_names_and_escapes_them():
    _check_available("cellblock")
    base = tempfile.mkdtemp(prefix="cb-names-")
    try:
        out = os.path.join(base, "out")
        script = "".join("open(%r, 'w').write('x\\n')\n" % n for n, _ in BAD)
        script += "open(b'caf\\xe9.csv', 'w').write('latin-1 name\\n')\n"
        script += "open('plain.csv', 'w').write('ok\\n')\n"
        script += "open('caf\u00e9 \u65e5\u672c.csv', 'w').write('ok\\n')\n"
        p = _run_out(script, out)
        err = p.stderr.decode("utf-8", "surrogateescape")
        assert p.returncode == 0, err
        saved = sorted(os.listdir(out))
        assert saved == sorted(["plain.csv", "caf\u00e9 \u65e5\u672c.csv"]), saved
        assert not RAW_BAD.search(err), "raw control/bidi in cellblock's lines: %r" % err
        for name, shown in BAD:
            line = "[cellblock] not saving '%s': " % shown
            assert line in err, (line, err)
        assert "contains U+202E, a bidirectional-text control" in err
        assert "contains U+009B, a C1 control character" in err
        assert "contains U+007F, a control character" in err
        assert r"[cellblock] not saving 'caf\351.csv': is not valid UTF-8 (at byte 3)" in err, err
        assert "[cellblock] saved %s/caf\u00e9 \u65e5\u672c.csv" % out in err, err
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_kernel_log_lines_never_carry_raw_controls():
    """The kernel's own log (what Jupyter captures from its stderr) names
    what the sandbox sent: a skipped artifact's path, a refused frame's
    type.  Both come out escaped."""
    _check_available("cellblock")
    base = tempfile.mkdtemp(prefix="cb-names-")
    try:
        out = os.path.join(base, "out")
        script = RAW + r'''
import os
os.symlink("/etc/passwd", "lnk\x1b]2;owned\x07\u202e.csv")    # skipped: a symlink, logged
frame({"type": "\x1b]2;owned\x07\u009b\u202e"})               # refused: unknown type, logged
'''
        p = _run_out(script, out)
        err = p.stderr.decode("utf-8", "surrogateescape")
        assert p.returncode == 0, err
        assert "skipped" in err and "unknown type" in err, err
        assert not RAW_BAD.search(err), "raw control/bidi in the kernel's log: %r" % err
        assert r"lnk\033]2;owned\a\342\200\256.csv" in err, err
    finally:
        shutil.rmtree(base, ignore_errors=True)
