"""Files a cell writes, returned as display_data (issue 4, "Artifacts";
docs/ARTIFACTS.md), end to end through the built kernel and jupyter_client:
byte-exact round trips (matplotlib PNG, pandas CSV), changed vs unchanged
files, subdirectories, unicode names, hidden files, --artifacts modes, the
per-file / per-cell / count limits and their notices, and every abuse a
hostile cell can try on the host-side collector (symlinks out of the working
directory, FIFOs, sockets, huge sparse files, thousands of files, deep
nesting, files changing while the cell ends).

All of it is cellblock-only: ipykernel has no artifacts.
"""

import base64
import hashlib
import json
import os
import re
import shutil
import struct
import tempfile
import textwrap
import time
import uuid
from queue import Empty

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from .helpers import Kernel, Result

pytestmark = pytest.mark.cellblock_only

BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build")
KSPEC = os.path.join(BUILD, "share", "jupyter", "kernels", "cellblock", "kernel.json")

MiB = 1 << 20
BINARY_MIMES = {"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf",
                "application/octet-stream"}

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def run(k, code, status="ok", timeout=30, **kw):
    r = k.execute(textwrap.dedent(code), timeout=timeout, **kw)
    assert r.status == status, f"expected {status}, got {r.status}: {r.error_text()}"
    return r


def artifacts(r):
    """display_data contents that carry metadata.cellblock.artifact."""
    return [m["content"] for m in r.of_type("display_data")
            if "artifact" in m["content"].get("metadata", {}).get("cellblock", {})]


def by_path(r):
    out = {}
    for c in artifacts(r):
        p = c["metadata"]["cellblock"]["artifact"]["path"]
        assert p not in out, f"{p} sent twice in one cell"
        out[p] = c
    return out


def notices(r):
    return [m["content"] for m in r.of_type("display_data")
            if "artifact_notice" in m["content"].get("metadata", {}).get("cellblock", {})]


def skipped(r):
    """{path: reason} over the notices of a cell."""
    out = {}
    for c in notices(r):
        for item in c["metadata"]["cellblock"]["artifact_notice"]["skipped"]:
            out[item["path"]] = item["reason"]
    return out


def notice_text(r):
    return "\n".join(c["data"]["text/plain"] for c in notices(r))


def summary(r):
    md = r.reply["metadata"]
    assert "cellblock" in md and "artifacts" in md["cellblock"], md
    return md["cellblock"]["artifacts"]


def decode(c):
    """The exact bytes of an artifact bundle."""
    art = c["metadata"]["cellblock"]["artifact"]
    mime = art["mime"]
    value = c["data"][mime]
    if mime in BINARY_MIMES:
        assert isinstance(value, str), f"{mime} must be base64 text"
        return base64.b64decode(value, validate=True)
    if mime == "application/json":
        raise AssertionError("a parsed JSON artifact has no exact bytes")
    assert isinstance(value, str), (mime, type(value))
    return value.encode("utf-8")


def check_bundle(c, reply_summary=None):
    """An artifact bundle is self-consistent: the bytes match size and sha256,
    text/plain is there, the reply lists it with the same metadata."""
    art = c["metadata"]["cellblock"]["artifact"]
    for key in ("path", "size", "sha256", "mime"):
        assert key in art, f"artifact metadata lacks {key}: {art}"
    assert "text/plain" in c["data"], c["data"].keys()
    if art["mime"] != "application/json":
        data = decode(c)
        assert len(data) == art["size"], (art["path"], len(data), art["size"])
        assert hashlib.sha256(data).hexdigest() == art["sha256"], art["path"]
    if reply_summary is not None:
        entries = [e for e in reply_summary if e["path"] == art["path"]]
        assert len(entries) == 1, f"{art['path']} not listed once in the reply: {reply_summary}"
        for key in ("size", "sha256", "mime"):
            assert entries[0][key] == art[key], (key, entries[0], art)
    return art


def check_cell(r):
    """Every artifact of a cell is consistent and listed in the reply, and the
    reply lists nothing that was not sent."""
    s = summary(r)
    arts = artifacts(r)
    for c in arts:
        check_bundle(c, s)
    sent = sorted(c["metadata"]["cellblock"]["artifact"]["path"] for c in arts)
    assert sorted(e["path"] for e in s) == sent, (s, sent)
    # a notice, if any, comes after the artifacts of the cell
    types = [("n" if "artifact_notice" in m["content"]["metadata"].get("cellblock", {}) else "a")
             for m in r.of_type("display_data")
             if m["content"]["metadata"].get("cellblock")]
    assert "".join(types) == "".join(sorted(types)), f"notice before an artifact: {types}"
    for c in notices(r):
        assert c["data"]["text/plain"].startswith("[artifacts] "), c["data"]["text/plain"][:200]
        n = c["metadata"]["cellblock"]["artifact_notice"]
        assert n["total"] >= len(n["skipped"]) >= 1, n
    return {c["metadata"]["cellblock"]["artifact"]["path"]: c for c in arts}


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    return struct.unpack(">II", data[16:24])


def spec_kernel(kernel_factory, tmp_path, *flags, stderr=None):
    """A kernel started from a temporary copy of the built kernelspec with
    `flags` appended to its argv (its log to `stderr`, a file, if given)."""
    with open(KSPEC) as f:
        spec = json.load(f)
    spec["argv"] = spec["argv"] + list(flags)
    name = "cb-test-" + uuid.uuid4().hex[:8]
    d = tmp_path / "kernels" / name
    d.mkdir(parents=True)
    (d / "kernel.json").write_text(json.dumps(spec))
    ksm = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    k = kernel_factory(kernel_name=name, kernel_spec_manager=ksm, stderr=stderr)
    # the flags really are on the kernel's command line
    with open(f"/proc/{k.pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    for fl in flags:
        assert fl.encode() in argv, (fl, argv)
    return k


class Recorder:
    """Runs cells and keeps EVERY message received on iopub and shell
    (whatever its parent), so a test can check that something never appears
    anywhere."""

    def __init__(self, kernel):
        self.k = kernel
        self.log = []

    def execute(self, code, timeout=30):
        kc = self.k.kc
        msg_id = kc.execute(textwrap.dedent(code), allow_stdin=False)
        deadline = time.monotonic() + timeout
        iopub, reply = [], None
        idle = False
        while not (idle and reply is not None):
            left = deadline - time.monotonic()
            assert left > 0, f"no reply/idle within {timeout} s for {code[:80]!r}"
            got = False
            for getter in (kc.get_iopub_msg, kc.get_shell_msg):
                try:
                    m = getter(timeout=min(0.05, left))
                except Empty:
                    continue
                got = True
                self.log.append(m)
                if m["parent_header"].get("msg_id") != msg_id:
                    continue
                if m["msg_type"] == "execute_reply":
                    reply = m
                else:
                    iopub.append(m)
                    if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                        idle = True
            if not got:
                continue
        # late messages too
        for getter in (kc.get_iopub_msg, kc.get_shell_msg):
            while True:
                try:
                    self.log.append(getter(timeout=0.1))
                except Empty:
                    break
        return Result(msg_id, reply, iopub)

    def run(self, code, status="ok", timeout=30):
        r = self.execute(code, timeout)
        assert r.status == status, f"expected {status}, got {r.status}: {r.error_text()}"
        return r

    def text(self):
        return "\n".join(json.dumps(m, default=str, ensure_ascii=False) for m in self.log)

    def assert_never_seen(self, *needles):
        blob = self.text()
        for n in needles:
            assert n not in blob, f"{n[:40]!r} appeared in a message"

    def largest(self):
        return max(len(json.dumps(m["content"], default=str)) for m in self.log)


def still_serving(k):
    r = run(k, "1 + 1")
    res = r.of_type("execute_result")
    assert res and res[0]["content"]["data"]["text/plain"] == "2"
    return r


# --------------------------------------------------------------------------
# byte-exact round trips
# --------------------------------------------------------------------------

def test_png_roundtrip_matplotlib(shared_kernel):
    r = run(shared_kernel, """
    import hashlib, os
    import matplotlib.pyplot as plt
    os.makedirs('rt', exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 3), dpi=80)
    ax.plot([1, 3, 2, 5]); ax.set_title('round trip')
    fig.savefig('rt/chart.png')
    plt.close(fig)
    data = open('rt/chart.png', 'rb').read()
    print(hashlib.sha256(data).hexdigest(), len(data))
    """, timeout=60)
    sha, size = r.stream().split()
    arts = check_cell(r)
    assert list(arts) == ["rt/chart.png"], list(arts)
    c = arts["rt/chart.png"]
    art = c["metadata"]["cellblock"]["artifact"]
    assert art["mime"] == "image/png"
    assert art["sha256"] == sha and art["size"] == int(size), (art, sha, size)
    data = base64.b64decode(c["data"]["image/png"], validate=True)
    assert hashlib.sha256(data).hexdigest() == sha
    assert len(data) == int(size)
    assert png_size(data) == (400, 240)
    assert c["metadata"].get("image/png") == {"width": 400, "height": 240}, c["metadata"]
    assert c["data"]["text/plain"].startswith("[artifact] rt/chart.png ("), c["data"]["text/plain"]
    assert "image/png" in c["data"]["text/plain"]
    assert art.get("description") == c["data"]["text/plain"]
    # nothing else: plt.close() means no figure display
    assert [m for m in r.of_type("display_data") if "artifact" not in
            m["content"]["metadata"].get("cellblock", {})] == []


def test_csv_roundtrip_pandas(shared_kernel):
    r = run(shared_kernel, """
    import hashlib, os
    import pandas as pd
    os.makedirs('rt', exist_ok=True)
    df = pd.DataFrame({'city': ['Zürich', '東京', 'naïve, "quoted"'], 'v': [1.5, -2, 3e10]})
    df.to_csv('rt/data.csv', index=False)
    data = open('rt/data.csv', 'rb').read()
    print(hashlib.sha256(data).hexdigest(), len(data))
    """, timeout=60)
    sha, size = r.stream().split()
    arts = check_cell(r)
    assert list(arts) == ["rt/data.csv"], list(arts)
    c = arts["rt/data.csv"]
    art = c["metadata"]["cellblock"]["artifact"]
    assert art["mime"] == "text/csv"
    assert art["sha256"] == sha and art["size"] == int(size)
    text = c["data"]["text/csv"]
    assert isinstance(text, str) and text.startswith("city,v\n"), text[:50]
    assert "東京" in text
    data = text.encode("utf-8")
    assert hashlib.sha256(data).hexdigest() == sha and len(data) == int(size)
    assert c["data"]["text/plain"].startswith("[artifact] rt/data.csv (")


def test_readme_example(shared_kernel):
    """The exact bundle the README shows for r.csv."""
    r = run(shared_kernel, "import pandas as pd; pd.DataFrame({'a': [1, 2]}).to_csv('r.csv'); 6*7",
            timeout=60)
    assert r.of_type("execute_result")[0]["content"]["data"] == {"text/plain": "42"}
    c = check_cell(r)["r.csv"]
    assert c["data"] == {"text/csv": ",a\n0,1\n1,2\n",
                         "text/plain": "[artifact] r.csv (11 B, text/csv)"}, c["data"]
    assert summary(r) == [{"path": "r.csv", "size": 11, "sha256": hashlib.sha256(
        b",a\n0,1\n1,2\n").hexdigest(), "mime": "text/csv"}]


# --------------------------------------------------------------------------
# changed vs unchanged, subdirectories, names
# --------------------------------------------------------------------------

def test_changed_vs_unchanged(shared_kernel):
    k = shared_kernel
    r = run(k, "import os\nos.makedirs('cu', exist_ok=True)\nopen('cu/a.txt', 'w').write('v1\\n')")
    assert list(check_cell(r)) == ["cu/a.txt"]
    first = check_cell(r)["cu/a.txt"]["metadata"]["cellblock"]["artifact"]["sha256"]
    # a cell that only reads it, twice: nothing sent
    for _ in range(2):
        r = run(k, "open('cu/a.txt').read()")
        assert artifacts(r) == [] and summary(r) == [], r.types()
        assert notices(r) == []
    # chmod only: not sent again
    r = run(k, "os.chmod('cu/a.txt', 0o600)")
    assert artifacts(r) == [], summary(r)
    # modified: sent again, with the new content
    r = run(k, "open('cu/a.txt', 'a').write('v2\\n')")
    arts = check_cell(r)
    assert list(arts) == ["cu/a.txt"]
    assert arts["cu/a.txt"]["data"]["text/plain"] == "v1\nv2\n"
    assert arts["cu/a.txt"]["metadata"]["cellblock"]["artifact"]["sha256"] != first
    # same size, old mtime restored, different content: caught by the sha256
    r = run(k, """
    st = os.stat('cu/a.txt')
    open('cu/a.txt', 'w').write('v1\\nv3\\n')
    os.utime('cu/a.txt', ns=(st.st_atime_ns, st.st_mtime_ns))
    """)
    arts = check_cell(r)
    assert list(arts) == ["cu/a.txt"], summary(r)
    assert arts["cu/a.txt"]["data"]["text/plain"] == "v1\nv3\n"
    # touch (new mtime, same bytes): sent again, as documented
    r = run(k, "os.utime('cu/a.txt', (1_000_000_000, 1_000_000_000))")
    assert list(check_cell(r)) == ["cu/a.txt"]
    # a new file next to it: only that one
    r = run(k, "open('cu/b.txt', 'w').write('b')")
    assert list(check_cell(r)) == ["cu/b.txt"]
    # cellblock never deletes or moves files
    r = run(k, "sorted(os.listdir('cu'))")
    assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == "['a.txt', 'b.txt']"


def test_subdirectories(shared_kernel):
    r = run(shared_kernel, """
    import os
    os.makedirs('a/b', exist_ok=True)
    with open('a/b/x.txt', 'w') as f:
        f.write('deep x')
    open('a/top.md', 'w').write('# top')
    """)
    arts = check_cell(r)
    assert set(arts) == {"a/b/x.txt", "a/top.md"}, list(arts)
    assert arts["a/b/x.txt"]["data"]["text/plain"] == "deep x"
    assert arts["a/top.md"]["data"]["text/markdown"] == "# top"


def test_unicode_names(shared_kernel):
    names = ["données/résumé 数据.csv", "ünï©ødé ✓.txt", "日本語/グラフ.svg"]
    r = run(shared_kernel, f"""
    import os
    for n in {names!r}:
        if os.path.dirname(n):
            os.makedirs(os.path.dirname(n), exist_ok=True)
    open({names[0]!r}, 'w').write('k,v\\né,1\\n')
    open({names[1]!r}, 'w').write('ü')
    open({names[2]!r}, 'w').write('<svg xmlns="http://www.w3.org/2000/svg" width="2" height="2"/>')
    """)
    arts = check_cell(r)
    assert set(arts) == set(names), list(arts)
    for n in names:
        art = arts[n]["metadata"]["cellblock"]["artifact"]
        assert not art.get("path_escaped"), art
        assert n in arts[n]["data"]["text/plain"] or art.get("description", "").find(n) >= 0
    assert arts[names[2]]["metadata"]["cellblock"]["artifact"]["mime"] == "image/svg+xml"
    assert arts[names[2]]["data"]["image/svg+xml"].startswith("<svg")


def test_non_utf8_name_escaped(shared_kernel):
    r = run(shared_kernel, "open(b'bad\\xffname.txt', 'w').write('b')")
    arts = check_cell(r)
    assert list(arts) == ["bad\\xffname.txt"], list(arts)
    assert arts["bad\\xffname.txt"]["metadata"]["cellblock"]["artifact"].get("path_escaped") is True


def test_shell_written_file(shared_kernel):
    r = run(shared_kernel, "!mkdir -p shdir && printf 'a,b\\n1,2\\n' > shdir/from_shell.csv")
    arts = check_cell(r)
    assert list(arts) == ["shdir/from_shell.csv"], list(arts)
    assert arts["shdir/from_shell.csv"]["data"]["text/csv"] == "a,b\n1,2\n"


def test_hidden_files_not_returned(shared_kernel):
    r = run(shared_kernel, """
    import os
    os.makedirs('.hdir/sub', exist_ok=True)
    os.makedirs('vis', exist_ok=True)
    open('.hidden.txt', 'w').write('h')
    open('.hdir/sub/x.csv', 'w').write('a\\n1\\n')
    open('vis/.dot.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n')
    open('vis/shown.txt', 'w').write('shown')
    os.makedirs('.ipynb_checkpoints', exist_ok=True)
    open('.ipynb_checkpoints/nb.json', 'w').write('{}')
    """)
    arts = check_cell(r)
    assert list(arts) == ["vis/shown.txt"], list(arts)
    assert notices(r) == [], notice_text(r)


def test_types_and_mimes(shared_kernel):
    r = run(shared_kernel, r"""
    import os, io, json
    os.makedirs('types', exist_ok=True)
    from PIL import Image
    Image.new('RGB', (3, 2), 'red').save('types/p.jpg')
    Image.new('RGB', (2, 2), 'blue').save('types/g.gif')
    Image.new('RGB', (4, 1), 'green').save('types/pic.PNG')
    Image.new('RGB', (1, 1), 'black').save('types/really_jpeg.png', format='JPEG')
    open('types/t.tsv', 'w').write('a\tb\n1\t2\n')
    json.dump({'k': [1, 2]}, open('types/d.json', 'w'))
    open('types/bad.json', 'w').write('{not json')
    open('types/p.html', 'w').write('<p>hi</p>')
    open('types/r.log', 'w').write('log line\n')
    open('types/doc.pdf', 'wb').write(b'%PDF-1.4\n%%EOF\n')
    open('types/blob.bin', 'wb').write(bytes(range(256)))
    open('types/fake.png', 'w').write('not a png')
    """, timeout=60)
    arts = check_cell(r)
    mimes = {p: c["metadata"]["cellblock"]["artifact"]["mime"] for p, c in arts.items()}
    assert mimes == {
        "types/p.jpg": "image/jpeg", "types/g.gif": "image/gif", "types/pic.PNG": "image/png",
        "types/really_jpeg.png": "image/jpeg",
        "types/t.tsv": "text/tab-separated-values", "types/d.json": "application/json",
        "types/bad.json": "text/plain", "types/p.html": "text/html", "types/r.log": "text/plain",
        "types/doc.pdf": "application/pdf"}, mimes
    assert arts["types/d.json"]["data"]["application/json"] == {"k": [1, 2]}
    assert arts["types/bad.json"]["data"]["text/plain"] == "{not json"
    # blob.bin: binary output is off by default -> ignored silently;
    # fake.png: its bytes disagree with its name -> a notice, not silence
    assert skipped(r) == {"types/fake.png": "content_mismatch"}, notice_text(r)
    assert "types/blob.bin" not in notice_text(r)


# --------------------------------------------------------------------------
# --artifacts none | images
# --------------------------------------------------------------------------

WRITE_MIXED = """
import os
import matplotlib.pyplot as plt
fig = plt.figure(); plt.plot([1, 2]); fig.savefig('m.png'); plt.close(fig)
open('m.svg', 'w').write('<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>')
open('m.csv', 'w').write('a\\n1\\n')
open('m.txt', 'w').write('t')
open('m.pdf', 'wb').write(b'%PDF-1.4\\n')
os.symlink('/etc/passwd', 'link.csv')
"""


def test_mode_none(kernel_factory, tmp_path):
    k = spec_kernel(kernel_factory, tmp_path, "--artifacts", "none")
    r = run(k, WRITE_MIXED, timeout=60)
    assert artifacts(r) == [] and notices(r) == [], r.types()
    assert r.of_type("display_data") == []
    # nothing listed (the kernel leaves cellblock.artifacts out in this mode)
    assert r.reply["metadata"].get("cellblock", {}).get("artifacts", []) == [], r.reply["metadata"]
    still_serving(k)


def test_mode_images(kernel_factory, tmp_path):
    k = spec_kernel(kernel_factory, tmp_path, "--artifacts", "images")
    r = run(k, WRITE_MIXED, timeout=60)
    arts = check_cell(r)
    assert set(arts) == {"m.png", "m.svg"}, list(arts)
    assert notices(r) == [], notice_text(r)
    still_serving(k)


# --------------------------------------------------------------------------
# limits and notices
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """One kernel with small limits: 1 MiB per file, 2 MiB and 3 files per cell."""
    tmp = tmp_path_factory.mktemp("spec")
    with open(KSPEC) as f:
        spec = json.load(f)
    spec["argv"] += ["--artifact-max-file", "1M", "--artifact-max-cell", "2M",
                     "--artifact-max-files", "3"]
    (tmp / "kernels" / "cb-limited").mkdir(parents=True)
    (tmp / "kernels" / "cb-limited" / "kernel.json").write_text(json.dumps(spec))
    k = Kernel(kernel_name="cb-limited",
               kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(tmp / "kernels")]))
    k.start()
    yield k
    k.stop(check=True)


def test_limit_per_file(limited):
    r = run(limited, """
    import os
    os.makedirs('pf', exist_ok=True)
    open('pf/big.csv', 'w').write('x' * ((1 << 20) + (1 << 19)))
    open('pf/small.csv', 'w').write('a\\n1\\n')
    """)
    arts = check_cell(r)
    assert list(arts) == ["pf/small.csv"], list(arts)
    assert skipped(r) == {"pf/big.csv": "file_too_large"}, notice_text(r)
    text = notice_text(r)
    assert "pf/big.csv" in text and "per-file limit" in text, text
    assert "1.5 MiB" in text and "1.0 MiB" in text, text
    # reported once, not every cell
    r = run(limited, "1")
    assert notices(r) == [] and artifacts(r) == []
    # shrunk below the limit: sent
    r = run(limited, "open('pf/big.csv', 'w').write('y' * 1000)")
    assert list(check_cell(r)) == ["pf/big.csv"]


def test_limit_file_count(limited):
    r = run(limited, """
    import os
    os.makedirs('cnt', exist_ok=True)
    for i in range(5):
        open(f'cnt/f{i}.txt', 'w').write(str(i))
    """)
    arts = check_cell(r)
    assert len(arts) == 3, list(arts)
    sk = skipped(r)
    assert len(sk) == 2 and set(sk.values()) == {"cell_file_limit"}, sk
    assert set(arts) | set(sk) == {f"cnt/f{i}.txt" for i in range(5)}
    text = notice_text(r)
    assert "[artifacts] 2 items not returned" in text, text
    for p in sk:
        assert p in text
    # the skipped ones are not sent by a later, unrelated cell ...
    r = run(limited, "x = 1")
    assert artifacts(r) == [] and notices(r) == [], r.types()
    # ... but when they change
    p = sorted(sk)[0]
    r = run(limited, f"open({p!r}, 'a').write('+')")
    assert list(check_cell(r)) == [p]


def test_limit_cell_bytes(limited):
    r = run(limited, """
    import os
    os.makedirs('cb', exist_ok=True)
    for i in range(3):
        open(f'cb/part{i}.csv', 'w').write(str(i) * (900 * 1024))
    """)
    arts = check_cell(r)
    assert len(arts) == 2, list(arts)
    assert sum(c["metadata"]["cellblock"]["artifact"]["size"] for c in arts.values()) <= 2 * MiB
    sk = skipped(r)
    assert len(sk) == 1 and list(sk.values()) == ["cell_byte_limit"], sk
    assert set(arts) | set(sk) == {f"cb/part{i}.csv" for i in range(3)}
    assert list(sk)[0] in notice_text(r)


# --------------------------------------------------------------------------
# abuse, from inside the sandbox
# --------------------------------------------------------------------------

@pytest.fixture
def host_secret():
    """A directory in the HOST /tmp with a secret file the kernel's user can
    read, and the host's /etc/passwd first line: neither may ever appear in
    a message."""
    d = tempfile.mkdtemp(prefix="cb-host-", dir="/tmp")
    secret = "CBSECRET" + uuid.uuid4().hex.upper() + "XYZ"  # length multiple of 3
    for name in ("secret.txt", "secret.csv", "secret.png"):
        with open(os.path.join(d, name), "w") as f:
            f.write(secret)
    with open("/etc/passwd") as f:
        passwd = f.readline().strip()
    yield d, secret, passwd
    shutil.rmtree(d, ignore_errors=True)


def _needles(secret, passwd):
    b64 = base64.b64encode(secret.encode()).decode()
    return [secret, b64[:-4], passwd]


@pytest.mark.timeout(90)
def test_abuse_symlinks(kernel, host_secret):
    d, secret, passwd = host_secret
    rec = Recorder(kernel)
    r = rec.run(f"""
    import os
    os.makedirs('sub', exist_ok=True)
    os.symlink('/etc/passwd', 'passwd.txt')
    os.symlink('/etc/passwd', 'passwd.csv')
    os.symlink('{d}/secret.txt', 'host_secret.txt')
    os.symlink('{d}/secret.csv', 'sub/host_secret.csv')
    os.symlink('{d}/secret.png', 'host_secret.png')
    os.symlink('../../../../../../../../../..{d}/secret.txt', 'sub/rel_secret.txt')
    os.symlink('{d}', 'hostdir')            # a directory pointing outside
    os.symlink('{d}', 'hostdir.csv')
    os.symlink('/etc', 'etc_link')
    os.symlink('/', 'root_link')
    open('inside.txt', 'w').write('inside')
    os.symlink('inside.txt', 'inside_link.txt')  # inside, but links are never followed
    os.symlink('loop_b.txt', 'loop_a.txt'); os.symlink('loop_a.txt', 'loop_b.txt')
    print(os.path.exists('{d}'))           # the host /tmp is not the sandbox's
    """)
    arts = check_cell(r)
    assert list(arts) == ["inside.txt"], list(arts)
    sk = skipped(r)
    for p in ("passwd.txt", "passwd.csv", "host_secret.txt", "sub/host_secret.csv",
              "host_secret.png", "sub/rel_secret.txt", "inside_link.txt", "hostdir.csv",
              "loop_a.txt", "loop_b.txt"):
        assert sk.get(p) == "symlink", (p, sk)
    assert not any(p.startswith(("hostdir/", "etc_link/", "root_link/")) for p in sk), sk
    # the same files as hard links are impossible across filesystems; within
    # the workdir they are refused
    r = rec.run("open('orig.txt', 'w').write('o')\nos.link('orig.txt', 'hard.txt')")
    assert artifacts(r) == []
    assert skipped(r) == {"orig.txt": "hard_link", "hard.txt": "hard_link"}, notice_text(r)
    # swap a sent file for a link to the host secret: a symlink, not its content
    r = rec.run(f"os.remove('inside.txt'); os.symlink('{d}/secret.txt', 'inside.txt')")
    assert artifacts(r) == []
    assert skipped(r).get("inside.txt") == "symlink", notice_text(r)
    # a directory swapped for a link: nothing below it is read
    r = rec.run(f"os.rename('sub', 'sub_old'); os.symlink('{d}', 'sub')")
    assert artifacts(r) == []
    still_serving(kernel)
    rec.run("1 + 1")
    rec.assert_never_seen(*_needles(secret, passwd))


@pytest.mark.timeout(90)
def test_abuse_fifo_and_socket(kernel):
    rec = Recorder(kernel)
    r = rec.run("""
    import os, socket, threading
    os.mkfifo('fifo.csv')
    os.makedirs('f', exist_ok=True)
    os.mkfifo('f/pipe.txt')
    cb_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cb_sock.bind('sock.csv')
    cb_sock.listen(1)
    open('plain.txt', 'w').write('p')
    """)
    assert list(check_cell(r)) == ["plain.txt"]
    sk = skipped(r)
    assert sk.get("fifo.csv") == "not_regular", sk
    assert sk.get("f/pipe.txt") == "not_regular", sk
    assert sk.get("sock.csv") == "not_regular", sk
    assert "fifo" in notice_text(r) and "socket" in notice_text(r), notice_text(r)
    still_serving(kernel)
    # a file that was sent, replaced by a FIFO with a writer blocked on it
    r = rec.run("""
    os.remove('plain.txt'); os.mkfifo('plain.txt')
    def writer():
        try:
            with open('plain.txt', 'w') as w:   # blocks until someone reads
                w.write('from fifo')
        except OSError:
            pass
    threading.Thread(target=writer, daemon=True).start()
    """)
    assert artifacts(r) == []
    assert skipped(r).get("plain.txt") == "not_regular", notice_text(r)
    still_serving(kernel)


@pytest.mark.timeout(90)
def test_abuse_huge_sparse_file(kernel):
    rec = Recorder(kernel)
    r = rec.run("""
    import os
    with open('huge.csv', 'wb') as f:
        f.truncate(2 << 30)                 # 2 GiB, sparse: no blocks used
    open('huge.png', 'wb').close(); os.truncate('huge.png', (2 << 30) + 1)
    open('ok.txt', 'w').write('ok')
    os.stat('huge.csv').st_size
    """, timeout=30)
    assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == str(2 << 30)
    assert list(check_cell(r)) == ["ok.txt"]
    sk = skipped(r)
    assert sk == {"huge.csv": "file_too_large", "huge.png": "file_too_large"}, sk
    assert "2.0 GiB" in notice_text(r), notice_text(r)
    assert rec.largest() < 64 * 1024, "a message far larger than anything sent"
    still_serving(kernel)


@pytest.mark.timeout(120)
def test_abuse_thousands_of_files(kernel, host_secret):
    d, secret, passwd = host_secret
    rec = Recorder(kernel)
    t0 = time.monotonic()
    r = rec.run(f"""
    import os
    os.makedirs('many', exist_ok=True)
    for i in range(3000):
        with open(f'many/f{{i:04d}}.txt', 'w') as f:
            f.write(str(i))
    for i in range(0, 3000, 100):
        os.symlink('{d}/secret.txt', f'many/link{{i:04d}}.txt')
    """, timeout=30)
    assert time.monotonic() - t0 < 30
    arts = check_cell(r)
    assert len(arts) == 50, len(arts)          # default: 50 files per cell
    assert all(p.startswith("many/f") for p in arts)
    (n,) = notices(r)
    meta = n["metadata"]["cellblock"]["artifact_notice"]
    assert meta["total"] == 2950 + 30, meta["total"]   # 2950 over the count, 30 links
    assert len(meta["skipped"]) <= 50
    assert {i["reason"] for i in meta["skipped"]} <= {"cell_file_limit", "symlink"}
    text = n["data"]["text/plain"]
    assert text.startswith("[artifacts] 2980 items not returned"), text[:100]
    assert re.search(r"\.\.\. and \d+ more", text), text[-200:]
    assert len(text) < 64 * 1024
    # not re-sent by the next cell; the kernel answers quickly enough
    r = rec.run("1 + 1", timeout=30)
    assert artifacts(r) == [] and notices(r) == []
    still_serving(kernel)
    rec.assert_never_seen(*_needles(secret, passwd))


@pytest.mark.timeout(120)
def test_abuse_scan_limit(kernel):
    """More directory entries than the scan examines: the walk stops with a
    notice instead of running on."""
    rec = Recorder(kernel)
    r = rec.run("""
    import os
    os.makedirs('scan', exist_ok=True)
    for i in range(10100):
        os.close(os.open(f'scan/.h{i:05d}', os.O_CREAT | os.O_WRONLY, 0o644))
    open('scan_marker.txt', 'w').write('m')
    """, timeout=60)
    check_cell(r)
    assert "scan_limit" in set(skipped(r).values()), notice_text(r)
    still_serving(kernel)


@pytest.mark.timeout(90)
def test_abuse_deep_nesting(kernel, host_secret):
    d, secret, passwd = host_secret
    rec = Recorder(kernel)
    r = rec.run(f"""
    import os
    parts = [f'l{{i}}' for i in range(30)]
    deep = os.path.join('deep', *parts)
    os.makedirs(deep)
    open(os.path.join(deep, 'bottom.txt'), 'w').write('bottom')
    os.symlink('{d}/secret.txt', os.path.join(deep, 'secret.txt'))
    open(os.path.join('deep', 'l0', 'top.txt'), 'w').write('top')
    os.symlink('{d}', os.path.join('deep', 'l0', 'l1', 'hostdir'))
    """)
    arts = check_cell(r)
    assert list(arts) == ["deep/l0/top.txt"], list(arts)
    sk = skipped(r)
    deep = [p for p, why in sk.items() if why == "too_deep"]
    assert len(deep) == 1 and deep[0].startswith("deep/l0/l1/"), sk
    assert set(sk.values()) == {"too_deep"}, sk   # the dir link has no collectable name
    assert "bottom.txt" not in json.dumps(summary(r))
    still_serving(kernel)
    rec.assert_never_seen(*_needles(secret, passwd))


@pytest.mark.timeout(150)
def test_abuse_files_changing_while_cell_ends(kernel_factory, tmp_path, host_secret):
    """A thread keeps rewriting and appending after the cell ended, and keeps
    swapping a file and a directory for symlinks to a host secret (the
    lstat/open race).  Every reply comes; whatever is sent is internally
    consistent (bytes = size = sha256) and within the limits; nothing is
    larger than the limits allow; the secret never shows."""
    d, secret, passwd = host_secret
    k = spec_kernel(kernel_factory, tmp_path, "--artifact-max-file", "1M",
                    "--artifact-max-cell", "2M")
    rec = Recorder(k)
    rec.run(f"""
    import os, random, threading, time
    cb_stop = threading.Event()
    os.makedirs('swapdir', exist_ok=True)
    def cb_churn():
        n = 0
        with open('grow.log', 'a') as g:
            while not cb_stop.is_set():
                n += 1
                g.write('line %d\\n' % n); g.flush()
                if g.tell() > (3 << 20):
                    g.seek(0); g.truncate()
                with open('churn.csv', 'w') as f:
                    f.write('x' * random.randrange(1, 900_000))
                if n % 50 == 0:
                    os.replace('churn.csv', 'moved.csv')
                # a regular file, then a link to the host secret, under one name
                with open('swap.tmp', 'w') as f:
                    f.write('harmless %d' % n)
                os.replace('swap.tmp', 'swap.txt')
                os.symlink('{d}/secret.txt', 'swap.lnk')
                os.replace('swap.lnk', 'swap.txt')
                # a directory, then a link to the host directory, under one name
                with open('swapdir/in.txt', 'w') as f:
                    f.write('inner %d' % n)
                os.rename('swapdir', 'swapdir.away')
                os.symlink('{d}', 'swapdir')
                os.remove('swapdir')
                os.rename('swapdir.away', 'swapdir')
    cb_thread = threading.Thread(target=cb_churn, daemon=True)
    cb_thread.start()
    time.sleep(0.3)
    """)
    sent_sha = {}
    for _ in range(8):
        r = rec.run("1 + 1", timeout=30)
        assert r.of_type("execute_result")[0]["content"]["data"]["text/plain"] == "2"
        arts = check_cell(r)      # bytes/size/sha256 agree for everything sent
        total = 0
        for p, c in arts.items():
            art = c["metadata"]["cellblock"]["artifact"]
            assert art["size"] <= MiB, art
            total += art["size"]
            sent_sha.setdefault(p, set()).add(art["sha256"])
        assert total <= 2 * MiB, total
        assert set(skipped(r).values()) <= {"changed_while_read", "file_too_large",
                                            "read_budget", "cell_byte_limit", "symlink",
                                            "not_regular", "unreadable"}, notice_text(r)
        for p in arts:
            assert p in ("grow.log", "churn.csv", "moved.csv", "swap.txt", "swapdir/in.txt"), p
    r = rec.run("""
    cb_was_alive = cb_thread.is_alive()     # the churn really ran all along
    cb_stop.set(); cb_thread.join(10)
    import hashlib
    # one pass in fifty ends by moving churn.csv away: then moved.csv is the last write
    cb_last = 'churn.csv' if os.path.exists('churn.csv') else 'moved.csv'
    cb_final = hashlib.sha256(open(cb_last, 'rb').read()).hexdigest()
    print(cb_was_alive, cb_thread.is_alive(), cb_last, cb_final)
    """)
    was_alive, alive, last, final = r.stream().split()
    assert was_alive == "True" and alive == "False", r.stream()
    arts = check_cell(r)
    # once the files are still, their final content comes back (or already had)
    if last in arts:
        assert arts[last]["metadata"]["cellblock"]["artifact"]["sha256"] == final
    else:
        assert final in sent_sha.get(last, set()), (last, skipped(r), sorted(arts))
    # no message larger than the limits allow: 1 MiB of text escapes to at most 2 MiB
    assert rec.largest() <= 2 * MiB + 64 * 1024, rec.largest()
    still_serving(k)
    rec.assert_never_seen(*_needles(secret, passwd))
