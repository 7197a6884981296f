"""`--secret NAME@HOST`: an agent's code calls an API with a key it never sees
(issue 22).

Inside the sandbox NAME holds a placeholder; the egress proxy terminates TLS
for the hosts the secret is bound to, verifies the real server (here against
a test CA given with --network-upstream-ca) and puts the value into the
request's headers.  Everything is on 127.0.0.1 behind pinned names: api.test
(the API and a PEP 503 index, both wanting the key), other.test (plain and
TLS, no secret), wrong.test (a certificate for another name) and
untrusted.test (a certificate of a CA nobody trusts).

After every kind of request (success, refusal, upstream TLS failure,
redirect to another host) the test collects everything the sandbox can read
that could hold the value -- its environment, every process's environ and
command line, the files of /etc/cellblock-ca, /run, /tmp and the home, and
what the requests returned or raised -- and looks for the value on the host
side, so the sandbox's code never holds it either.
"""

import base64
import json
import os
import secrets as pysecrets
import shutil
import subprocess
import tempfile
import zlib

import pytest

from .conftest import KERNEL_BIN
from .helpers import execute, is_cellblock
from .proxy_kit import (WHEEL_NAME, AllowKernel, landlock_abi, make_ca, make_cert, proc_status,
                        serve_recording, skip)

pytestmark = pytest.mark.cellblock_only

SECRET = "sk-test-" + pysecrets.token_hex(20)

# What the sandbox can read that could hold the value, zlib'd and base64'd
# onto stdout (the host looks in it).
COLLECT = r'''
import os, base64, zlib
def _collect(extra=""):
    parts = [repr(dict(os.environ)), extra]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            for f in ("environ", "cmdline"):
                try:
                    parts.append(open(f"/proc/{pid}/{f}", "rb").read().decode("latin-1"))
                except OSError:
                    pass
    left = 16 << 20
    for top in ("/etc/cellblock-ca", "/run", "/tmp", os.path.expanduser("~")):
        for d, _, files in os.walk(top):
            for n in files:
                try:
                    data = open(os.path.join(d, n), "rb").read(left)
                except OSError:
                    continue
                left -= len(data)
                parts.append(data.decode("latin-1"))
    blob = zlib.compress("\n".join(parts).encode("latin-1", "replace"))
    print("COLLECTED", base64.b64encode(blob).decode())
'''


def _collected(out):
    line = next(l for l in out.splitlines() if l.startswith("COLLECTED "))
    return zlib.decompress(base64.b64decode(line.split(" ", 1)[1])).decode("latin-1")


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    if not is_cellblock():
        skip("cellblock only")
    if shutil.which("openssl") is None:
        skip("openssl is needed to make the test CA (scripts/deps.sh installs it)")
    d = str(tmp_path_factory.mktemp("secrets"))
    make_ca(d, "ca")
    make_ca(d, "rogue")
    make_cert(d, "ca", "api", ["api.test"])
    make_cert(d, "ca", "api2", ["api2.test"])
    make_cert(d, "ca", "other", ["other.test"])
    make_cert(d, "ca", "notthis", ["not-this.test"])
    make_cert(d, "rogue", "untrusted", ["untrusted.test"])
    s = {"dir": d, "ca": os.path.join(d, "ca.pem"),
         "api": serve_recording(SECRET, "api", d), "api2": serve_recording(SECRET, "api2", d),
         "other": serve_recording(SECRET),
         "other_tls": serve_recording(SECRET, "other", d),
         "wrong": serve_recording(SECRET, "notthis", d),
         "untrusted": serve_recording(SECRET, "untrusted", d)}
    s["port"] = {k: v.server_address[1] for k, v in s.items() if hasattr(v, "server_address")}
    yield s
    for v in s.values():
        if hasattr(v, "shutdown"):
            v.shutdown()
            v.server_close()


def _args(s):
    p = s["port"]
    allow = (f"api.test:{p['api']},other.test:{p['other']},other.test:{p['other_tls']},"
             f"wrong.test:{p['wrong']},untrusted.test:{p['untrusted']}")
    args = ["--network", "allow:" + allow, "--secret", "API_KEY@api.test,wrong.test,untrusted.test",
            "--network-upstream-ca", s["ca"], "--log-level", "info"]
    for h in ("api", "other", "wrong", "untrusted"):
        args += ["--network-resolve", f"{h}.test=127.0.0.1"]
    return args


@pytest.fixture(scope="module")
def sk(tls):
    k = AllowKernel(_args(tls), os.path.join(tls["dir"], "kernel.log"),
                    env={"API_KEY": SECRET}).start()
    yield k
    k.stop(check=True)


def _clean(k, out):
    """Nothing the sandbox can read holds the value; the kernel's log neither."""
    blob = _collected(out)
    assert SECRET not in blob, "the secret's value is readable in the sandbox"
    assert "cb-secret-" in blob            # the placeholder is (sanity: the search saw the env)
    assert "PRIVATE KEY" not in blob       # the session CA's key stays in the proxy
    assert SECRET not in k.log()


def test_the_api_gets_the_key_through_urllib_requests_curl_and_pip(sk, tls):
    url = f"https://api.test:{tls['port']['api']}"
    out = sk.run(COLLECT + f"""
import json, subprocess, sys, urllib.request, requests
key = os.environ['API_KEY']
res = {{}}
req = urllib.request.Request({url!r} + '/v1/ok', headers={{'Authorization': 'Bearer ' + key}})
res['urllib'] = urllib.request.urlopen(req, timeout=20).read().decode()
s = requests.Session()                      # one kept-alive TLS connection, two requests
res['requests'] = [s.get({url!r} + '/v1/ok', headers={{'Authorization': 'Bearer ' + key}},
                         timeout=20).text for _ in range(2)]
r = subprocess.run(['curl', '-sS', '-H', 'Authorization: Bearer ' + key, {url!r} + '/v1/ok'],
                   capture_output=True, text=True, timeout=60)
res['curl'] = r.stdout or r.stderr
r = subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps', '-d', '/tmp/dl',
                    '--index-url', 'https://__token__:' + key + '@api.test:{tls['port']['api']}/simple/',
                    'tinypkg'], capture_output=True, text=True, timeout=120)
res['pip'] = (r.returncode, sorted(os.listdir('/tmp/dl')) if os.path.isdir('/tmp/dl') else [])
print(json.dumps(res))
_collect(json.dumps(res) + r.stderr)
""", timeout=180)
    res = json.loads(out.splitlines()[0])
    assert res["urllib"] == '{"ok": true}', res
    assert res["requests"] == ['{"ok": true}'] * 2, res
    assert res["curl"] == '{"ok": true}', res
    assert res["pip"] == [0, [WHEEL_NAME]], res
    seen = [a for _, a, _ in tls["api"].seen]
    assert f"Bearer {SECRET}" in seen and any(a.startswith("Basic ") for a in seen), seen
    assert not any("cb-secret-" in a for a in seen), "a placeholder reached the bound host"
    assert "secret value put in for api.test" in sk.log_with(["secret value put in for api.test"])
    _clean(sk, out)


def test_a_placeholder_sent_to_another_host_is_refused_and_logged(sk, tls):
    p = tls["port"]
    out = sk.run(COLLECT + f"""
import json, urllib.request, urllib.error
key = os.environ['API_KEY']
def get(url, **h):
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=h), timeout=20).read().decode()
    except urllib.error.HTTPError as e:
        return '%d %s' % (e.code, e.reason)
    except urllib.error.URLError as e:
        return 'URLError %s' % e.reason
res = {{
  'direct': get('http://other.test:{p['other']}/v1/ok', Authorization='Bearer ' + key),
  'x-api-key': get('http://other.test:{p['other']}/v1/ok', **{{'X-Api-Key': key}}),
  'in-url': get('http://other.test:{p['other']}/v1/ok?key=' + key),
  # the bound host redirects elsewhere; urllib follows with the header
  'redirect': get('https://api.test:{p['api']}/redirect?to=http://other.test:{p['other']}/v1/ok',
                  Authorization='Bearer ' + key),
  'redirect-tls': get('https://api.test:{p['api']}/redirect?to=https://other.test:{p['other_tls']}/v1/ok',
                      Authorization='Bearer ' + key),
}}
print(json.dumps(res))
_collect(json.dumps(res))
""")
    res = json.loads(out.splitlines()[0])
    refusal = ("403 Forbidden (cellblock proxy: the request carries the placeholder of the secret "
               "API_KEY, which is only for api.test, wrong.test, untrusted.test, not for other.test:")
    for k in ("direct", "x-api-key", "in-url", "redirect"):
        assert res[k].startswith(refusal), (k, res)
    # other.test over TLS is a tunnel the proxy does not read: the placeholder
    # goes through, useless; the value never does
    assert res["redirect-tls"] == "401 Unauthorized", res
    for srv in ("other", "other_tls"):
        got = [a + k for _, a, k in tls[srv].seen]
        assert not any(SECRET in a for a in got), (srv, got)
    assert any("cb-secret-" in a for _, a, _ in tls["other_tls"].seen)
    assert not any("cb-secret-" in a for _, a, _ in tls["other"].seen)
    log = sk.log_with(["placeholder of the secret API_KEY"])
    assert "deny GET other.test" in log and "placeholder of the secret API_KEY" in log
    _clean(sk, out)


def test_a_placeholder_in_a_body_to_another_host_is_refused_and_logged(sk, tls):
    p = tls["port"]
    out = sk.run(COLLECT + f"""
import json, requests
key = os.environ['API_KEY']
r = requests.post('http://other.test:{p['other']}/v1/upload', json={{'api_key': key}}, timeout=20)
# chunked (a generator body, sent after the head): the placeholder over two chunks
c = requests.post('http://other.test:{p['other']}/v1/upload',
                  data=iter([('{{"k": "' + key[:15]).encode(), (key[15:] + '"}}').encode()]),
                  timeout=20)
print(json.dumps([r.status_code, r.text, c.status_code]))
_collect(r.text + c.text)
""")
    status, text, chunked = json.loads(out.splitlines()[0])
    assert status == 403 and chunked == 403, out
    assert text.startswith("cellblock proxy: the request's body carries the placeholder of the "
                           "secret API_KEY, which is only for api.test, wrong.test, untrusted.test, "
                           f"not for other.test:{p['other']}"), text
    assert not any(b"cb-secret-" in b or SECRET.encode() in b for b in tls["other"].bodies if b)
    assert "deny POST other.test" in sk.log_with(["deny POST other.test"])
    _clean(sk, out)


def test_upstream_certificates_are_verified(sk, tls):
    p = tls["port"]
    out = sk.run(COLLECT + f"""
import json, urllib.request, urllib.error
key = os.environ['API_KEY']
res = {{}}
for name in ('wrong', 'untrusted'):
    url = 'https://%s.test:%d/v1/ok' % (name, {{'wrong': {p['wrong']}, 'untrusted': {p['untrusted']}}}[name])
    try:
        urllib.request.urlopen(urllib.request.Request(url, headers={{'Authorization': 'Bearer ' + key}}),
                               timeout=20)
        res[name] = 'REACHED'
    except urllib.error.URLError as e:
        res[name] = str(e.reason)
print(json.dumps(res))
_collect(json.dumps(res))
""")
    res = json.loads(out.splitlines()[0])
    assert res["wrong"] == (f"Tunnel connection failed: 502 Bad Gateway (cellblock proxy: TLS with "
                            f"wrong.test:{p['wrong']}: the server's certificate is not for "
                            "wrong.test)"), res
    assert res["untrusted"].startswith(
        f"Tunnel connection failed: 502 Bad Gateway (cellblock proxy: TLS with "
        f"untrusted.test:{p['untrusted']}: the server's certificate is not trusted ("), res
    for srv in ("wrong", "untrusted"):
        assert not any(a for _, a, _ in tls[srv].seen), "a request reached an unverified server"
    _clean(sk, out)


def test_the_session_ca_is_for_the_bound_hosts_only(sk, tls):
    banner = sk.kc.kernel_info(reply=True, timeout=30)["content"]["banner"]
    assert "; secrets for api.test, " in banner, banner      # (a long list is cut with ...)
    pem = sk.run("print(open('/etc/cellblock-ca/session-ca.pem').read())")
    bundle_has = sk.run("b = open('/etc/cellblock-ca/bundle.pem').read()\n"
                        "print(b.count('BEGIN CERTIFICATE') > 100, b.strip().endswith("
                        "open('/etc/cellblock-ca/session-ca.pem').read().strip()))")
    assert bundle_has.split() == ["True", "True"], bundle_has   # system CAs + the session CA
    text = subprocess.run(["openssl", "x509", "-noout", "-text", "-enddate"], input=pem,
                          capture_output=True, text=True, check=True).stdout
    assert "X509v3 Name Constraints: critical" in text and "CA:TRUE, pathlen:0" in text, text
    permitted = text.split("Permitted:")[1].split("Signature Algorithm")[0]
    assert sorted(l.strip() for l in permitted.strip().splitlines() if "DNS:" in l) == [
        "DNS:api.test", "DNS:untrusted.test", "DNS:wrong.test"], permitted
    env = json.loads(sk.run("import os, json\nprint(json.dumps({k: os.environ[k] for k in ("
                            "'SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'PIP_CERT', 'CURL_CA_BUNDLE')}))"))
    assert set(env.values()) == {"/etc/cellblock-ca/bundle.pem"}, env
    # a leaf the proxy would make for a host the CA is not for fails
    # verification anyway: the constraint is checked by every client
    r = subprocess.run(["openssl", "x509", "-noout", "-checkend", str(31 * 86400)], input=pem,
                       capture_output=True, text=True)
    assert r.returncode == 1, "the session CA outlives CB_PROXY_CA_DAYS"


def test_the_value_is_on_no_command_line_and_in_no_environment_outside(sk):
    from .helpers import descendants
    for pid in [sk.pid] + sorted(descendants(sk.pid)):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode("latin-1")
        except OSError:
            continue
        assert SECRET not in cmd, cmd
        name = os.path.basename(cmd.split("\0")[0])
        if name in ("cellblock-launcher", "cellblock-proxy"):
            env = open(f"/proc/{pid}/environ", "rb").read().decode("latin-1")
            assert SECRET not in env, name


def test_the_proxy_holding_the_secrets_runs_confined(sk):
    """The proxy the launcher started, with TLS and the secrets in its
    memory, seen from the host: seccomp filter, no_new_privs, not dumpable
    (its /proc files are root's: no other process of its uid can read its
    memory), no capabilities, Landlock (its start-up line)."""
    sk.run("print(1)")
    pid = sk.proxy_pid()
    assert pid is not None
    st = proc_status(pid)
    assert st["Seccomp"] == "2" and st["NoNewPrivs"] == "1", st
    assert all(int(st[c], 16) == 0 for c in ("CapInh", "CapPrm", "CapEff", "CapAmb")), st
    if os.geteuid() == 0:
        assert st["Uid"].split() == ["65534"] * 4, st["Uid"]
    assert os.stat(f"/proc/{pid}/mem").st_uid == 0 and os.stat(f"/proc/{pid}/environ").st_uid == 0
    want = "seccomp, Landlock)" if landlock_abi() > 0 else "seccomp, no Landlock)"
    assert want in sk.log_with([want]), sk.log()[-2000:]


def test_a_missing_value_says_which_variable(tls, tmp_path):
    k = AllowKernel(_args(tls), str(tmp_path / "nokey.log"), env={"API_KEY": ""})
    k.env.pop("API_KEY")
    os_key = os.environ.pop("API_KEY", None)
    try:
        k.start()
        r = execute(k.kc, "print(1)")
        assert r.status == "error"
        assert ("--secret API_KEY: API_KEY is not set in the kernel's environment"
                in r.error_text()), r.error_text()
    finally:
        k.stop(check=True)
        if os_key is not None:
            os.environ["API_KEY"] = os_key


def test_the_flags_check_secrets(tls, tmp_path):
    base = [KERNEL_BIN, "install", "--prefix", str(tmp_path), "--name", "cb-s"]
    r = subprocess.run(base + ["--network", "allow:api.example:443", "--secret",
                               "OPENAI_API_KEY@api.example", "--network-upstream-ca", tls["ca"]],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    spec = json.load(open(tmp_path / "share/jupyter/kernels/cb-s/kernel.json"))
    assert "OPENAI_API_KEY@api.example" in spec["argv"] and not any(
        "sk-" in a for a in spec["argv"])
    for bad, why in [
        (["--secret", "K@a.example"], "--secret needs --network allow:"),
        (["--network", "allow:a.example", "--secret", "K@b.example"], "b.example is not in the allowlist"),
        (["--network", "allow:a.example", "--secret", "K@a.example", "--env", "K"], "--env would put the value"),
        (["--network", "allow:10.0.0.1", "--secret", "K@10.0.0.1"], "is not a host name"),
        (["--network", "allow:localhost:8000", "--secret", "K@localhost"], "is not a host name"),
        (["--network", "allow:a.example", "--secret", "PATH@a.example"], "PATH may not be set"),
        (["--network", "allow:a.example", "--secret", "nohost"], "is not NAME@HOST"),
        (["--network", "allow:a.example", "--network-upstream-ca", "/etc/hosts"], "is for the hosts of a --secret"),
        # an upstream CA file must hold a certificate: a key alone, or any other file, is refused
        (["--network", "allow:a.example", "--secret", "K@a.example", "--network-upstream-ca",
          "/etc/hosts"], "--network-upstream-ca /etc/hosts: no certificate in it"),
        (["--network", "allow:a.example", "--secret", "K@a.example", "--network-upstream-ca",
          os.path.join(tls["dir"], "ca.key")], "ca.key: no certificate in it"),
    ]:
        r = subprocess.run(base + bad, capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and why in r.stderr, (bad, r.stderr)


def test_a_kernel_with_an_upstream_ca_without_a_certificate_does_not_start(tls, tmp_path):
    r = subprocess.run([KERNEL_BIN, "run", "--network", f"allow:api.test:{tls['port']['api']}",
                        "--secret", "API_KEY@api.test", "--network-upstream-ca",
                        os.path.join(tls["dir"], "ca.key"), "-"],
                       input="print(1)", capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, API_KEY=SECRET))
    assert r.returncode == 2 and "ca.key: no certificate in it" in r.stderr, r
    assert "PRIVATE KEY" not in r.stderr + r.stdout


def test_a_combined_cert_and_key_file_puts_only_the_certificate_in_the_sandbox(tls, tmp_path):
    """--network-upstream-ca given a PEM holding a CA's private key beside its
    certificate (a common way to keep both): the sandbox's bundle gets the
    certificate alone, and TLS to the host still verifies."""
    combined = tmp_path / "ca-with-key.pem"
    key = open(os.path.join(tls["dir"], "ca.key")).read()
    combined.write_text(key + open(tls["ca"]).read())
    os.chmod(tmp_path, 0o755)
    os.chmod(combined, 0o644)
    args = _args(tls)
    args[args.index("--network-upstream-ca") + 1] = str(combined)
    k = AllowKernel(args, str(tmp_path / "combined.log"), env={"API_KEY": SECRET}).start()
    try:
        out = k.run(COLLECT + f"""
import requests
r = requests.get('https://api.test:{tls['port']['api']}/v1/ok',
                 headers={{'Authorization': 'Bearer ' + os.environ['API_KEY']}}, timeout=20)
print(r.status_code, r.text)
print('BUNDLE', base64.b64encode(open('/etc/cellblock-ca/bundle.pem', 'rb').read()).decode())
_collect(r.text)
""")
        assert out.startswith('200 {"ok": true}'), out
        bundle = base64.b64decode(next(l for l in out.splitlines()
                                       if l.startswith("BUNDLE ")).split()[1]).decode()
        ca_body = "".join(open(tls["ca"]).read().split("-----")[2].split())
        assert ca_body in "".join(bundle.split()), "the upstream CA's certificate is not in the bundle"
        key_body = [l for l in key.splitlines() if l and not l.startswith("-----")]
        blob = _collected(out)
        assert "PRIVATE KEY" not in blob and "PRIVATE KEY" not in bundle
        assert not any(l in blob for l in key_body), "a line of the CA's key is in the sandbox"
        _clean(k, out)
    finally:
        k.stop(check=True)


def test_an_agent_using_the_client_calls_the_api_with_a_key_it_never_sees(tls):
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client"))
    from cellblock import Sandbox
    p = tls["port"]
    with Sandbox(network=[f"api.test:{p['api']}"],
                 secrets={"API_KEY": {"hosts": ["api.test"], "value": SECRET}},
                 extra_args=["--network-resolve", "api.test=127.0.0.1",
                             "--network-upstream-ca", tls["ca"]]) as sb:
        ex = sb.run_code(COLLECT + f"""
import requests
r = requests.get('https://api.test:{p['api']}/v1/ok',
                 headers={{'Authorization': 'Bearer ' + os.environ['API_KEY']}}, timeout=20)
print(r.status_code, r.text)
_collect(r.text)
""")
        assert ex.error is None, ex.error
        out = "".join(ex.logs.stdout)
        assert out.startswith('200 {"ok": true}'), out
        blob = _collected(out)
        assert SECRET not in blob and "cb-secret-" in blob
        assert ex.costs["network"][f"api.test:{p['api']}"]["connections"] == 1, ex.costs


def test_the_client_binds_a_secret_to_a_list_of_hosts(tls, monkeypatch):
    """Sandbox(secrets={"NAME": ["host1", "host2"]}): the value comes from
    this process's environment; both hosts get it, another host gets a 403;
    each bound host's bytes up (a 30000-byte body inside TLS) are in the
    cell's costs."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client"))
    from cellblock import Sandbox
    p = tls["port"]
    monkeypatch.setenv("API_KEY", SECRET)
    n0 = {h: len(tls[h].seen) for h in ("api", "api2")}
    with Sandbox(network=[f"api.test:{p['api']}", f"api2.test:{p['api2']}",
                          f"other.test:{p['other']}"],
                 secrets={"API_KEY": ["api.test", "api2.test"]},
                 extra_args=["--network-resolve", "api.test=127.0.0.1",
                             "--network-resolve", "api2.test=127.0.0.1",
                             "--network-resolve", "other.test=127.0.0.1",
                             "--network-upstream-ca", tls["ca"]]) as sb:
        ex = sb.run_code(COLLECT + f"""
import json, requests
h = {{'Authorization': 'Bearer ' + os.environ['API_KEY']}}
res = [requests.post('https://api.test:{p['api']}/v1/up', data=b'z' * 30000, headers=h,
                     timeout=20).text,
       requests.get('https://api2.test:{p['api2']}/v1/ok', headers=h, timeout=20).text,
       requests.get('http://other.test:{p['other']}/v1/ok', headers=h, timeout=20).status_code]
print(json.dumps(res))
_collect(json.dumps(res))
""")
        assert ex.error is None, ex.error
        out = "".join(ex.logs.stdout)
        assert json.loads(out.splitlines()[0]) == ['{"ok": true, "got": 30000}', '{"ok": true}',
                                                   403], out
        blob = _collected(out)
        assert SECRET not in blob and "cb-secret-" in blob
        net = ex.costs["network"]
        api, api2 = net[f"api.test:{p['api']}"], net[f"api2.test:{p['api2']}"]
        assert api["connections"] == 1 and 30000 < api["bytes_up"] < 32000, net
        assert api2["connections"] == 1 and 0 < api2["bytes_up"] < 2000, net
        assert api["bytes_down"] > 0 and api2["bytes_down"] > 0, net
        assert net[f"other.test:{p['other']}"]["refused"] == 1, net
    for h in ("api", "api2"):
        assert (f"/v1/{'up' if h == 'api' else 'ok'}", f"Bearer {SECRET}", "") in \
            tls[h].seen[n0[h]:], (h, tls[h].seen)


def test_cellblock_run_takes_a_secret(tls, tmp_path):
    """`cellblock run --secret NAME@HOST`: the value comes from the
    environment `cellblock run` was started with, the code sees the
    placeholder, the host gets the value; --json carries the host's costs."""
    p = tls["port"]
    code = COLLECT + f"""
import requests
r = requests.get('https://api.test:{p['api']}/v1/ok',
                 headers={{'Authorization': 'Bearer ' + os.environ['API_KEY']}}, timeout=20)
print(r.status_code, r.text)
_collect(r.text)
"""
    n0 = len(tls["api"].seen)
    r = subprocess.run([os.path.join(os.path.dirname(KERNEL_BIN), "cellblock"), "run", "--json",
                        "--network", f"allow:api.test:{p['api']}", "--secret", "API_KEY@api.test",
                        "--network-resolve", "api.test=127.0.0.1",
                        "--network-upstream-ca", tls["ca"], "-"],
                       input=code, capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, API_KEY=SECRET))
    assert r.returncode == 0, r.stderr[-3000:]
    assert SECRET not in r.stdout and SECRET not in r.stderr
    out = json.loads(r.stdout)
    stdout = "".join(out["logs"]["stdout"])
    assert stdout.startswith('200 {"ok": true}'), out
    blob = _collected(stdout)
    assert SECRET not in blob and "cb-secret-" in blob
    assert ("/v1/ok", f"Bearer {SECRET}", "") in tls["api"].seen[n0:], tls["api"].seen
    assert out["costs"]["network"][f"api.test:{p['api']}"]["connections"] == 1, out["costs"]


def test_a_restarted_proxy_refuses_the_hosts_with_secrets_saying_why(tls, tmp_path):
    import signal
    from .helpers import wait_gone
    k = AllowKernel(_args(tls), str(tmp_path / "restart.log"), env={"API_KEY": SECRET}).start()
    try:
        pid = k.proxy_pid()
        os.kill(pid, signal.SIGKILL)
        assert not wait_gone({pid}, 10)
        out = k.run(COLLECT + f"""
import urllib.request, urllib.error
try:
    urllib.request.urlopen('https://api.test:{tls['port']['api']}/v1/ok', timeout=20)
    print('REACHED')
except urllib.error.URLError as e:
    print(e.reason)
try:
    urllib.request.urlopen('http://other.test:{tls['port']['other']}/x', timeout=20)
except urllib.error.HTTPError as e:
    print(e.code)
_collect()
""")
        first = out.splitlines()
        assert first[0] == (f"Tunnel connection failed: 503 Service Unavailable (cellblock proxy: the "
                            f"egress proxy restarted, and with it the session CA this sandbox trusts: "
                            f"TLS to api.test:{tls['port']['api']} cannot carry its secrets; restart "
                            f"the kernel)"), out
        assert first[1] == "401", out          # hosts without secrets still work
        _clean(k, out)
        assert "its new session CA is not the sandbox's" in k.log_with(["its new session CA"])
    finally:
        k.stop(check=True)
