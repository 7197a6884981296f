"""`--network allow:HOST[:PORT],...`: the sandbox reaches only the listed hosts,
through cellblock-proxy, and nothing else.

Everything here stays on loopback: the "hosts" are servers this module starts
on 127.0.0.1 (a plain HTTP server, a TLS server with a CA made here that also
serves a tiny PEP 503 index, and a server on a port that is not listed); the
names are pinned with --network-resolve, so the proxy never asks a real DNS
server; the DNS-rebinding test gives the proxy a fake DNS server on
127.0.0.1.  Nothing is ever sent to another address.

Through the real path: a built kernel started by jupyter_client with
`--network allow:...`, its cells using urllib, pip and curl as a user would.
The proxy's bounds (idle and head timeouts, connections) are also exercised
on the proxy program alone with small values, which is faster and keeps
timing out of the kernel tests.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from .conftest import KERNEL_BIN
from .helpers import TIMEOUT, execute, wait_gone
from .proxy_kit import (BIG, WHEEL_NAME, AllowKernel, Proxy, dns_server, hosts,  # noqa: F401
                        ipykernel, landlock_abi, proc_status, recv_all, skip)

pytestmark = pytest.mark.cellblock_only

CA_IN_SANDBOX = "/etc/cellblock-test/ca.pem"
BUDGET_MB = 4           # --network-max-bytes of the budget kernel


def _allow_args(h, *extra):
    return ["--network", f"allow:plain.test:{h['plain']},tls.test:{h['tls']}",
            "--network-resolve", "plain.test=127.0.0.1",
            "--network-resolve", "tls.test=127.0.0.1",
            "--ro-bind", f"{h['ca']}:{CA_IN_SANDBOX}",
            "--log-level", "info", *extra]


@pytest.fixture(scope="module")
def nk(hosts):
    k = AllowKernel(_allow_args(hosts), os.path.join(hosts["dir"], "kernel.log")).start()
    # what a user does to trust a private CA: bind it in, point Python at it
    k.run(f"import os\nos.environ['SSL_CERT_FILE'] = {CA_IN_SANDBOX!r}\n"
          f"os.environ['PIP_CERT'] = {CA_IN_SANDBOX!r}\n"
          f"os.environ['CURL_CA_BUNDLE'] = {CA_IN_SANDBOX!r}")
    yield k
    k.stop(check=True)


# --------------------------------------------------------------------------
# through the kernel
# --------------------------------------------------------------------------

def test_banner_and_environment_state_the_allowlist(nk, hosts):
    banner = nk.kc.kernel_info(reply=True, timeout=TIMEOUT)["content"]["banner"]
    assert (f"egress only via HTTP(S) proxy to plain.test:{hosts['plain']}, "
            f"tls.test:{hosts['tls']}") in banner, banner
    env = json.loads(nk.run("import os, json\nprint(json.dumps({k: v for k, v in os.environ.items()"
                            " if 'proxy' in k.lower() or k.startswith('CELLBLOCK_NETWORK')}))"))
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        assert env[var] == "http://127.0.0.1:3128"
    assert "127.0.0.1" in env["NO_PROXY"] and "localhost" in env["no_proxy"]
    assert env["CELLBLOCK_NETWORK_ALLOW"] == f"plain.test:{hosts['plain']}, tls.test:{hosts['tls']}"


def test_urllib_reaches_the_allowed_http_and_https_hosts(nk, hosts):
    out = nk.run(
        "import urllib.request\n"
        f"print(urllib.request.urlopen('http://plain.test:{hosts['plain']}/hello', timeout=20).read().decode())\n"
        f"print(urllib.request.urlopen('https://tls.test:{hosts['tls']}/hello', timeout=20).read().decode())\n")
    assert f"hello from plain, Host plain.test:{hosts['plain']}" in out
    assert f"hello from tls, Host tls.test:{hosts['tls']}" in out
    want = [f"allow GET plain.test:{hosts['plain']} by rule plain.test:{hosts['plain']}",
            f"allow CONNECT tls.test:{hosts['tls']} by rule tls.test:{hosts['tls']}"]
    log = nk.log_with(want)
    assert want[0] in log
    assert want[1] in log


def test_pip_downloads_and_installs_from_the_allowed_index(nk, hosts):
    index = f"https://tls.test:{hosts['tls']}/simple/"
    out = nk.run(
        "import subprocess, sys, os\n"
        f"r = subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps', '--index-url', {index!r},"
        " 'tinypkg', '-d', '/tmp/dl'], capture_output=True, text=True, timeout=120)\n"
        "print(r.returncode, r.stderr[-2000:])\n"
        "print(sorted(os.listdir('/tmp/dl')) if os.path.isdir('/tmp/dl') else None)\n", timeout=150)
    assert out.startswith("0 "), out
    assert WHEEL_NAME in out
    # the README's recipe: %pip install --target into the home, then import
    out = nk.run(f"%pip install -q --no-deps --index-url {index} --target ~/pkgs tinypkg\n"
                 "import os, sys; sys.path.insert(0, os.path.expanduser('~/pkgs'))\n"
                 "import tinypkg; print('VALUE', tinypkg.VALUE)", timeout=150)
    assert "VALUE 42" in out, out
    # an index not on the list: %pip says the sandbox reaches only the allowlist
    r = execute(nk.kc, "%pip download -q --no-deps --retries 0 --timeout 5 -d /tmp/dl2 "
                       f"--index-url https://unlisted.test:{hosts['tls']}/simple/ tinypkg",
                timeout=150)
    err = r.stream("stderr")
    assert "reaches only the hosts of its allowlist" in err, err[-2000:]


def test_unlisted_port_name_and_address_are_refused_with_a_403_naming_why(nk, hosts):
    out = nk.run(
        "import urllib.request, urllib.error\n"
        "def get(url, opener=urllib.request.urlopen):\n"
        "    try:\n"
        "        opener(url, timeout=20).read(); return 'REACHED'\n"
        "    except urllib.error.HTTPError as e: return '%d %s' % (e.code, e.reason)\n"
        "    except urllib.error.URLError as e: return 'URLError %s' % e.reason\n"
        f"print('port:', get('http://plain.test:{hosts['other']}/hello'))\n"
        f"print('name:', get('http://other.test:{hosts['plain']}/hello'))\n"
        f"print('tls-port:', get('https://tls.test:{hosts['other']}/hello'))\n"
        # an unlisted IP literal, asked of the proxy directly
        "import socket\n"
        "s = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
        f"s.sendall(b'GET http://127.0.0.1:{hosts['plain']}/hello HTTP/1.1\\r\\n\\r\\n')\n"
        "print('literal:', s.recv(300).split(b'\\r\\n')[0][9:].decode())\n")
    lines = dict(line.split(": ", 1) for line in out.strip().splitlines())
    assert lines["port"] == (f"403 Forbidden (cellblock proxy: plain.test:{hosts['other']} is not in "
                             "the allowlist (--network allow:...))"), out
    assert lines["name"].startswith(f"403 Forbidden (cellblock proxy: other.test:{hosts['plain']} is "
                                    "not in the allowlist"), out
    # https: urllib shows the CONNECT status line, which carries the reason
    assert "Tunnel connection failed: 403 Forbidden (cellblock proxy: tls.test:" in lines["tls-port"], out
    assert lines["literal"].startswith(f"403 Forbidden (cellblock proxy: 127.0.0.1:{hosts['plain']} "
                                       "is not in the allowlist"), out
    want = [f"deny GET plain.test:{hosts['other']}: 403",
            f"deny CONNECT tls.test:{hosts['other']}: 403"]
    log = nk.log_with(want)
    assert want[0] in log
    assert want[1] in log


DIRECT = """
import socket, json
res = {}
for name, fn in [
    ("tcp", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=5).close()),
    ("dns", lambda: socket.getaddrinfo("plain.test", 80)),
]:
    try:
        fn(); res[name] = "REACHED"
    except OSError as e:
        res[name] = type(e).__name__
print(json.dumps(res))
"""


def test_direct_connections_without_the_proxy_fail(nk, hosts):
    """TCP to the host's loopback and name resolution do not work in the
    sandbox; the stock ipykernel (control) reaches the same server, so the
    test can tell."""
    res = json.loads(nk.run(DIRECT.replace("PORT", str(hosts["plain"]))))
    assert res == {"tcp": "ConnectionRefusedError", "dns": "gaierror"}, res
    with ipykernel() as ref:
        r = execute(ref.kc, DIRECT.replace("PORT", str(hosts["plain"])))
        assert json.loads(r.stream("stdout"))["tcp"] == "REACHED"


def test_curl_uses_the_proxy_and_the_unix_socket(nk, hosts):
    if shutil.which("curl") is None:
        return skip("curl not installed (scripts/deps.sh installs it)")
    out = nk.run(
        "import subprocess\n"
        f"r = subprocess.run(['curl', '-sS', 'https://tls.test:{hosts['tls']}/hello'], capture_output=True, text=True)\n"
        "print('env:', r.returncode, r.stdout or r.stderr)\n"
        "r = subprocess.run(['curl', '-sS', '--unix-socket', '/run/cellblock/proxy.sock',\n"
        f"                    'http://plain.test:{hosts['plain']}/hello'], capture_output=True, text=True)\n"
        "print('unix:', r.returncode, r.stdout or r.stderr)\n")
    assert "env: 0 hello from tls" in out, out
    assert "unix: 0 hello from plain" in out, out


def test_proxy_survives_malformed_requests_from_the_sandbox(nk, hosts):
    out = nk.run(
        "import socket, os, urllib.request\n"
        "def ask(data, read=True):\n"
        "    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
        "    s.sendall(data)\n"
        "    got = s.recv(200) if read else b''\n"
        "    s.close()\n"
        "    return got.split(b'\\r\\n')[0].decode('latin-1')\n"
        "print(ask(b'\\x00\\xff' * 100 + b'\\r\\n\\r\\n'))\n"
        "print(ask(b'GET http://a HTTP/1.1\\r\\nX: ' + b'y' * 20000 + b'\\r\\n\\r\\n'))\n"
        "print(ask(b'GET http://x.test/ HTTP/1.1\\r\\nA: 1\\r\\n b\\r\\n\\r\\n'))\n"
        "for i in range(200):\n"
        "    ask(os.urandom(i % 97 + 1) + b'\\r\\n\\r\\n', read=False)\n"
        f"print(urllib.request.urlopen('http://plain.test:{hosts['plain']}/hello', timeout=20).read().decode())\n")
    lines = out.strip().splitlines()
    assert lines[0].startswith("HTTP/1.1 400 Bad Request"), out
    assert lines[1].startswith("HTTP/1.1 431 Request Header Fields Too Large"), out
    assert lines[2].startswith("HTTP/1.1 400 Bad Request (cellblock proxy: folded header line)"), out
    assert lines[3].startswith("hello from plain"), out


def test_the_launcher_restarts_a_proxy_that_died(nk, hosts):
    pid = nk.proxy_pid()
    assert pid is not None, "no cellblock-proxy below the kernel"
    os.kill(pid, signal.SIGKILL)
    assert not wait_gone({pid}, 10)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and nk.proxy_pid() in (None, pid):
        time.sleep(0.05)
    assert nk.proxy_pid() not in (None, pid)
    out = nk.run(f"import urllib.request\nprint(urllib.request.urlopen("
                 f"'http://plain.test:{hosts['plain']}/hello', timeout=20).read().decode())")
    assert "hello from plain" in out
    assert "restarting it (1 of 3)" in nk.log_with(["restarting it (1 of 3)"])


def test_a_large_download_is_bounded_and_the_proxy_dies_with_the_kernel(hosts):
    log = os.path.join(hosts["dir"], "budget.log")
    k = AllowKernel(_allow_args(hosts, "--network-max-bytes", f"{BUDGET_MB}M"), log).start()
    try:
        proxy = k.proxy_pid()
        assert proxy is not None
        out = k.run(
            "import urllib.request, urllib.error\n"
            f"r = urllib.request.urlopen('http://plain.test:{hosts['plain']}/big', timeout=60)\n"
            "got = 0\n"
            "try:\n"
            "    while True:\n"
            "        b = r.read(65536)\n"
            "        if not b: break\n"
            "        got += len(b)\n"
            "except Exception as e:\n"
            "    print('cut:', type(e).__name__)\n"
            "print('got', got)\n"
            "try:\n"
            f"    urllib.request.urlopen('http://plain.test:{hosts['plain']}/hello', timeout=20)\n"
            "except urllib.error.HTTPError as e:\n"
            "    print('after:', e.code, e.reason)\n", timeout=90)
        got = int(out.split("got ")[1].split()[0])
        assert got <= BUDGET_MB << 20, out
        assert got < BIG
        assert "after: 403 Forbidden (cellblock proxy: the session's network byte budget (4 MiB) " \
               "is used up)" in out, out
        want = "network byte budget (4194304 bytes) is used up"
        assert want in k.log_with([want])
    finally:
        k.stop(check=True)     # fails if any process (the proxy included) survives
    assert not wait_gone({proxy}, 5)


def test_kernel_install_and_the_flags_validate_the_allowlist(tmp_path):
    r = subprocess.run([KERNEL_BIN, "install", "--prefix", str(tmp_path), "--name", "cb-net",
                        "--network", "allow:pypi.org,files.pythonhosted.org:443",
                        "--network-resolve", "pypi.org=127.0.0.1", "--network-max-conns", "8"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    spec = json.load(open(tmp_path / "share/jupyter/kernels/cb-net/kernel.json"))
    assert spec["argv"][-6:] == ["--network", "allow:pypi.org,files.pythonhosted.org:443",
                                 "--network-resolve", "pypi.org=127.0.0.1",
                                 "--network-max-conns", "8"]
    assert "network allowlist" in spec["display_name"]
    for bad, why in [(["--network", "allow:"], "empty"),
                     (["--network", "allow:a.org:99999"], "port"),
                     (["--network", "allow:::1"], "IPv6"),
                     (["--network-resolve", "a.org=1.2.3.4"], "needs --network allow"),
                     (["--network", "allow:a.org", "--sandbox", "none"], "needs --sandbox full")]:
        r = subprocess.run([KERNEL_BIN, "install", "--prefix", str(tmp_path), *bad],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and why in r.stderr, (bad, r.stderr)
    r = subprocess.run([KERNEL_BIN, "--help"], capture_output=True, text=True, timeout=30)
    assert "allow:HOST[:PORT],..." in r.stdout and "--network-resolve NAME=ADDR" in r.stdout


def test_sandbox_client_accepts_a_host_list(hosts):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client"))
    from cellblock import Sandbox
    with Sandbox(network=[f"plain.test:{hosts['plain']}"],
                 extra_args=["--network-resolve", "plain.test=127.0.0.1"]) as sb:
        ex = sb.run_code("import urllib.request\nurllib.request.urlopen("
                         f"'http://plain.test:{hosts['plain']}/hello', timeout=20).read().decode()")
        assert ex.error is None, ex.error
        assert "hello from plain" in ex.text
        assert "egress only via HTTP(S) proxy to plain.test" in sb.kernel_info["banner"]
    with pytest.raises(ValueError):
        Sandbox(network=["bad host!"])


# --------------------------------------------------------------------------
# the proxy program alone: bounds with small values, DNS answers
# --------------------------------------------------------------------------

@pytest.fixture
def plain_port(hosts):
    return hosts["plain"]


def test_the_proxy_is_confined_seen_from_outside(plain_port, monkeypatch):
    """proxy/confine.c, as the host sees it: seccomp in filter mode,
    no_new_privs, no capabilities, uid 65534 when started by root; and
    Landlock, through a consequence: c-ares reads the file HOSTALIASES names
    when it resolves a one-label name (a file any uid may read, here), and
    the confined proxy may read /etc/hosts and /dev/urandom only, so the
    alias is never read and the name does not resolve.  Unconfined, the
    same request is answered by plain.test (checked when this test was
    written, by turning Landlock off in confine.c)."""
    d = tempfile.mkdtemp(prefix="cb-aliases-")
    try:
        os.chmod(d, 0o755)
        aliases = os.path.join(d, "aliases")
        with open(aliases, "w") as f:
            f.write("aliasx localhost\n")
        os.chmod(aliases, 0o644)
        monkeypatch.setenv("HOSTALIASES", aliases)
        px = Proxy("--allow", f"aliasx:{plain_port}")
        try:
            st = proc_status(px.p.pid)
            assert st["Seccomp"] == "2" and st["NoNewPrivs"] == "1", st
            assert all(int(st[c], 16) == 0 for c in ("CapInh", "CapPrm", "CapEff", "CapAmb")), st
            if os.geteuid() == 0:
                assert st["Uid"].split() == ["65534"] * 4, st["Uid"]
            if landlock_abi() == 0:
                skip("no Landlock in this kernel: the proxy runs without it")
            s = px.request(f"GET http://aliasx:{plain_port}/hello HTTP/1.1\r\n\r\n".encode())
            reply = recv_all(s)
            s.close()
            assert reply.startswith(b"HTTP/1.1 502 Bad Gateway (cellblock proxy: cannot resolve "
                                    b"aliasx"), reply
            assert "seccomp, Landlock)" in px.log_text()
        finally:
            assert px.stop(), "the proxy died"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_proxy_idle_and_head_timeouts(plain_port):
    px = Proxy("--allow", f"plain.test:{plain_port}", "--resolve", "plain.test=127.0.0.1",
                "--idle-timeout-ms", "300", "--head-timeout-ms", "300")
    try:
        s = px.request(f"CONNECT plain.test:{plain_port} HTTP/1.1\r\n\r\n".encode())
        first = s.recv(200)
        assert first.startswith(b"HTTP/1.1 200 Connection established")
        assert recv_all(s) == b""        # closed by the proxy, not by our 10 s timeout
        s.close()
        s = px.request(b"GET http://plain.test/ HTTP/1.1\r\n")   # never finished
        assert recv_all(s).startswith(b"HTTP/1.1 408 Request Timeout")
        s.close()
    finally:
        assert px.stop(), "the proxy died"


def test_proxy_connection_limit_makes_new_ones_wait(plain_port):
    px = Proxy("--allow", f"plain.test:{plain_port}", "--resolve", "plain.test=127.0.0.1",
                "--max-conns", "2")
    try:
        held = [px.request(f"CONNECT plain.test:{plain_port} HTTP/1.1\r\n\r\n".encode())
                for _ in range(2)]
        for s in held:
            assert s.recv(200).startswith(b"HTTP/1.1 200")
        third = px.request(f"GET http://plain.test:{plain_port}/hello HTTP/1.1\r\n\r\n".encode(),
                           timeout=1)
        with pytest.raises(socket.timeout):
            third.recv(100)               # not served while two are open
        held[0].close()
        third.settimeout(10)
        assert b"hello from plain" in recv_all(third)
        third.close()
        held[1].close()
    finally:
        assert px.stop(), "the proxy died"


def test_dns_answers_in_special_ranges_are_refused(plain_port):
    """A listed name whose DNS answer is loopback (rebinding) or the cloud
    metadata address is refused: only the operator (an IP rule, a pin, the
    host's /etc/hosts) can make such an address reachable.  The proxy never
    connects there: the refusal comes before connect(2)."""
    dns, stop, thread = dns_server({"rebind.test": "127.0.0.1", "meta.test": "169.254.169.254"})
    px = Proxy("--allow", f"rebind.test:{plain_port},meta.test:{plain_port}",
                "--dns-server", f"127.0.0.1:{dns.getsockname()[1]}")
    try:
        for name, what in [("rebind.test", "127.0.0.1, a loopback address"),
                           ("meta.test", "169.254.169.254, a cloud metadata address")]:
            s = px.request(f"GET http://{name}:{plain_port}/hello HTTP/1.1\r\n\r\n".encode())
            reply = recv_all(s).decode("latin-1")
            s.close()
            assert reply.startswith(f"HTTP/1.1 403 Forbidden (cellblock proxy: {name} resolves to "
                                    f"{what}: not allowed unless listed"), reply
        s = px.request(f"GET http://nx.test:{plain_port}/ HTTP/1.1\r\n\r\n".encode())
        assert recv_all(s).startswith(b"HTTP/1.1 403")   # not listed: never resolved
        s.close()
    finally:
        alive = px.stop()
        stop.set()
        thread.join(5)
        dns.close()
    assert alive, "the proxy died"
    px.log.seek(0)
    log = px.log.read().decode()
    assert " allow GET" not in log, log


def test_proxy_survives_a_flood_of_random_connections(plain_port):
    px = Proxy("--allow", f"plain.test:{plain_port}", "--resolve", "plain.test=127.0.0.1",
                "--head-timeout-ms", "2000")
    try:
        rnd = __import__("random").Random(1234)
        for i in range(300):
            data = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 300)))
            if i % 3 == 0:
                data = b"CONNECT " + data + b" HTTP/1.1\r\n\r\n"
            elif i % 3 == 1:
                data = b"GET http://" + data + b"\r\n\r\n"
            s = px.request(data)
            s.close()
        s = px.request(f"GET http://plain.test:{plain_port}/hello HTTP/1.1\r\n\r\n".encode())
        assert b"hello from plain" in recv_all(s)
        s.close()
    finally:
        assert px.stop(), "the proxy died"
