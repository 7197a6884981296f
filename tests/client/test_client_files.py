"""sb.files: write/read/list through the kernel's channel, leaving no trace
in the user's history, execution_count or artifacts."""

import hashlib
import os

import pytest


def _count(sb):
    return sb.run_code("None").execution_count


def test_round_trip_all_bytes_big_and_unicode(sb):
    before = _count(sb)
    hist_before = sb.run_code("len(In)").text

    all_bytes = bytes(range(256)) * 3
    big = os.urandom(3 << 20)                    # 3 MiB: several chunks
    name = "données/été ✓/naïve ☃.bin"
    sb.files.write("all.bin", all_bytes)
    info = sb.files.write(name, big)
    assert info.size == len(big) and info.path.endswith(name)
    sb.files.write("hello.txt", "héllo\n")
    assert sb.files.read("all.bin") == all_bytes
    assert sb.files.read(name) == big
    assert sb.files.read("hello.txt", format="text") == "héllo\n"
    assert sb.files.read("./hello.txt") == "héllo\n".encode()
    assert sb.files.read(sb.workdir + "/hello.txt") == "héllo\n".encode()

    # the sandbox sees the same bytes
    ex = sb.run_code("import hashlib\n[hashlib.sha256(open(p, 'rb').read()).hexdigest() for p in %r] == %r"
                     % (["all.bin", name], [hashlib.sha256(all_bytes).hexdigest(),
                                            hashlib.sha256(big).hexdigest()]))
    assert ex.error is None and ex.text == "True"
    # uploads are not returned as artifacts of the next cell
    assert ex.artifacts == []
    # files ops did not move execution_count nor touch In / history
    assert ex.execution_count == before + 2
    assert sb.run_code("len(In)").text == str(int(hist_before) + 2)
    # no temporary upload file left behind, no helper name left in globals
    names = [e.name for e in sb.files.list("données/été ✓")]
    assert names == ["naïve ☃.bin"]
    assert sb.run_code("[k for k in globals() if 'cellblock' in k]").text == "[]"


def test_execution_count_and_last_value_unchanged(sb):
    ex = sb.run_code("'last value'")
    n = ex.execution_count
    sb.files.write("x.txt", b"x")
    sb.files.read("x.txt")
    sb.files.list()
    sb.files.exists("x.txt")
    ex = sb.run_code("_")
    assert ex.execution_count == n + 1
    assert ex.text == "'last value'"


def test_list_exists_remove(sb):
    sb.files.write("dir1/a.txt", "a")
    sb.files.write("dir1/sub/b.txt", "bb")
    entries = {e.name: e for e in sb.files.list("dir1")}
    assert set(entries) == {"a.txt", "sub"}
    assert entries["a.txt"].type == "file" and entries["a.txt"].size == 1
    assert entries["sub"].type == "dir"
    assert entries["a.txt"].path == sb.workdir + "/dir1/a.txt"
    assert "dir1" in {e.name for e in sb.files.list()}
    assert sb.files.exists("dir1/a.txt")
    sb.files.remove("dir1/a.txt")
    assert not sb.files.exists("dir1/a.txt")
    # overwrite replaces, does not append
    sb.files.write("dir1/sub/b.txt", "c")
    assert sb.files.read("dir1/sub/b.txt") == b"c"
    sb.files.write("empty.bin", b"")
    assert sb.files.read("empty.bin") == b""


def test_errors_and_path_validation(sb):
    with pytest.raises(FileNotFoundError):
        sb.files.read("no/such/file")
    sb.files.write("adir/f", "1")
    with pytest.raises(IsADirectoryError):
        sb.files.read("adir")
    with pytest.raises(IsADirectoryError):
        sb.files.write("adir", "1")
    for bad in ["../escape", "a/../../b", "/etc/passwd", "/home", "", ".", "a\x00b"]:
        with pytest.raises(ValueError):
            sb.files.write(bad, b"x")
    with pytest.raises(ValueError):
        sb.files.read("/tmp/../etc/passwd")
    with pytest.raises(TypeError):
        sb.files.write("ok.txt", 123)
    # a user's chdir does not move where files land
    sb.run_code("import os; os.chdir('/tmp')")
    sb.files.write("still-home.txt", "h")
    assert sb.run_code("open(os.path.expanduser('~/still-home.txt')).read()").text == "'h'"
    sb.run_code("os.chdir(os.path.expanduser('~'))")
