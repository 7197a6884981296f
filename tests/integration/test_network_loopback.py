"""`--network allow:127.0.0.1:PORT` and `allow:localhost:PORT` reach a server
on the host's loopback (issue 18, finding 4).

Clients in the sandbox send loopback addresses around the proxy (NO_PROXY
keeps the sandbox's own servers direct), so the sandbox's init listens on
each listed loopback pair inside and the proxy forwards what arrives there
to the same address and port on the host.  Before this, the request went to
the sandbox's own loopback, where nothing listened: ECONNREFUSED, no hint.
What cannot work that way (the proxy's own port 3128) is refused at install
and at start, naming the form that does.
"""

import json
import os
import subprocess

import pytest

from .conftest import KERNEL_BIN
from .helpers import execute
from .proxy_kit import AllowKernel, hosts  # noqa: F401

pytestmark = pytest.mark.cellblock_only

GET = """
import json, urllib.request, urllib.error, subprocess
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=20).read().decode()
    except urllib.error.HTTPError as e:
        return '%d %s' % (e.code, e.reason)
    except OSError as e:
        return type(getattr(e, 'reason', e)).__name__
"""


@pytest.fixture(scope="module")
def lk(hosts):
    k = AllowKernel(["--network", f"allow:127.0.0.1:{hosts['plain']},localhost:{hosts['other']}",
                     "--log-level", "info"],
                    os.path.join(hosts["dir"], "loopback.log")).start()
    yield k
    k.stop(check=True)


def test_a_listed_loopback_address_reaches_the_host(lk, hosts):
    out = json.loads(lk.run(GET + f"""
r = {{}}
r['ip'] = get('http://127.0.0.1:{hosts['plain']}/hello')
r['localhost'] = get('http://localhost:{hosts['other']}/hello')
r['curl'] = subprocess.run(['curl', '-sS', 'http://127.0.0.1:{hosts['plain']}/hello'],
                           capture_output=True, text=True).stdout
r['unlisted'] = get('http://127.0.0.1:{hosts['tls']}/hello')
print(json.dumps(r))
"""))
    assert out["ip"] == f"hello from plain, Host 127.0.0.1:{hosts['plain']}", out
    assert out["localhost"] == f"hello from other, Host localhost:{hosts['other']}", out
    assert out["curl"] == out["ip"], out
    # not listed: the sandbox's own loopback, where nothing listens
    assert out["unlisted"] == "ConnectionRefusedError", out
    want = f"allow TCP 127.0.0.1:{hosts['plain']} by rule 127.0.0.1:{hosts['plain']}"
    assert want in lk.log_with([want])


def test_servers_inside_the_sandbox_stay_reachable(lk):
    out = lk.run(GET + """
import http.server, threading
srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)
threading.Thread(target=srv.serve_forever, daemon=True).start()
open('inside.txt', 'w').write('served inside')
print(get('http://127.0.0.1:%d/inside.txt' % srv.server_address[1]))
srv.shutdown()
""")
    assert out.strip() == "served inside", out


def test_the_proxys_own_port_is_refused_naming_the_form_that_works(tmp_path):
    want = ("port 3128 of the sandbox's loopback is the egress proxy's own; name the host's "
            "loopback instead: --network-resolve NAME=127.0.0.1 with allow:NAME:3128")
    for spec in ("allow:127.0.0.1:3128", "allow:localhost:3128", "allow:pypi.org,[::1]:3128"):
        r = subprocess.run([KERNEL_BIN, "install", "--prefix", str(tmp_path), "--network", spec],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and want in r.stderr, (spec, r.stderr)
    # at start too: `cellblock run` takes the same flags
    r = subprocess.run([os.path.join(os.path.dirname(KERNEL_BIN), "cellblock"), "run",
                        "--network", "allow:127.0.0.1:3128", "-"], input="print(1)",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and want in r.stderr, r.stderr
    many = ",".join(f"127.0.0.{i}:80" for i in range(1, 18))
    r = subprocess.run([KERNEL_BIN, "install", "--prefix", str(tmp_path), "--network",
                        "allow:" + many], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "more than 16 loopback address:port pairs" in r.stderr, r.stderr
    assert "--network-resolve NAME=127.0.0.1 with allow:NAME:PORT" in r.stderr


def test_the_pinned_name_form_works_too(hosts, tmp_path):
    k = AllowKernel(["--network", f"allow:model.test:{hosts['plain']}",
                     "--network-resolve", "model.test=127.0.0.1"],
                    str(tmp_path / "pinned.log")).start()
    try:
        r = execute(k.kc, GET + f"print(get('http://model.test:{hosts['plain']}/hello'))")
        assert r.stream("stdout").strip() == f"hello from plain, Host model.test:{hosts['plain']}"
    finally:
        k.stop(check=True)
