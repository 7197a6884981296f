"""A network policy that changes while the session runs, and what each cell
cost (issue 22).

cellblock_network_request (control) replaces the allowlist of the running
sandbox without losing its state; connections the new list no longer
allows are closed; every execute_reply names the policy in force and the
cell's costs; usage_request answers with ipykernel's keys and the sandbox's
figures.  Through a kernel started by jupyter_client, a notebook run by
nbclient, the Python client, and `cellblock run --json`.  Loopback only:
the hosts are proxy_kit's servers on 127.0.0.1 behind pinned names.
"""

import json
import os
import subprocess
import sys

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from .conftest import BUILD
from .helpers import execute, get_reply
from .proxy_kit import AllowKernel, hosts, ipykernel  # noqa: F401

pytestmark = pytest.mark.cellblock_only

GET = """
import urllib.request, urllib.error
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=20).read().decode()[:10]
    except urllib.error.HTTPError as e:
        return '%d' % e.code
"""


def _args(h, *extra):
    return ["--network", f"allow:plain.test:{h['plain']}", "--network-resolve", "plain.test=127.0.0.1",
            "--network-resolve", "other.test=127.0.0.1", "--log-level", "info", *extra]


def _control(kc, msg_type, content):
    msg = kc.session.msg(msg_type, content)
    kc.control_channel.send(msg)
    return get_reply(kc, msg["header"]["msg_id"], channel="control", timeout=30)


@pytest.fixture(scope="module")
def pk(hosts):
    k = AllowKernel(_args(hosts), os.path.join(hosts["dir"], "policy.log")).start()
    yield k
    k.stop(check=True)


def test_the_policy_changes_mid_session_and_keeps_state(pk, hosts):
    plain, other = f"http://plain.test:{hosts['plain']}/hello", f"http://other.test:{hosts['other']}/hello"
    r = execute(pk.kc, GET + f"x = 41\nimport socket\n"
                # a tunnel held open across the change: the new policy closes it
                f"held = socket.create_connection(('127.0.0.1', 3128))\n"
                f"held.sendall(b'CONNECT plain.test:{hosts['plain']} HTTP/1.1\\r\\n\\r\\n')\n"
                f"print(held.recv(100).split(b'\\r\\n')[0].decode())\n"
                f"print(get({plain!r}), get({other!r}))")
    assert r.stream("stdout").split("\n")[:2] == ["HTTP/1.1 200 Connection established",
                                                  "hello from 403"], r.stream("stdout")
    meta = r.reply["metadata"]["cellblock"]["network"]
    assert meta == {"mode": "allow", "allow": [f"plain.test:{hosts['plain']}"], "generation": 0}
    rep = _control(pk.kc, "cellblock_network_request", {"allow": [f"other.test:{hosts['other']}"]})
    c = rep["content"]
    assert rep["msg_type"] == "cellblock_network_reply" and c["status"] == "ok", c
    assert c["network"] == {"mode": "allow", "allow": [f"other.test:{hosts['other']}"],
                            "generation": 1} and c["closed"] >= 1 and c["applied"], c
    r = execute(pk.kc, f"held.settimeout(10)\nprint(held.recv(100) == b'', x + 1)\n"
                       f"print(get({plain!r}), get({other!r}))")
    assert r.stream("stdout").split("\n")[:2] == ["True 42", "403 hello from"], \
        r.stream("stdout")
    assert r.reply["metadata"]["cellblock"]["network"]["generation"] == 1
    # back to the kernelspec's list
    c = _control(pk.kc, "cellblock_network_request", {"allow": None})["content"]
    assert c["status"] == "ok" and c["network"]["allow"] == [f"plain.test:{hosts['plain']}"], c
    r = execute(pk.kc, f"print(get({plain!r}), get({other!r}))")
    assert r.stream("stdout").strip() == "hello from 403", r.stream("stdout")
    log = pk.log_with(["is not allowed by the new policy: closing"])
    assert f"plain.test:{hosts['plain']} is not allowed by the new policy: closing" in log


def test_bad_policy_requests_are_refused_with_the_reason(pk, hosts):
    for content, why in [({"allow": ["bad host!"]}, "is not a host name"),
                         ({"allow": []}, "a list of 1 to"),
                         ({"allow": "plain.test"}, "a list of 1 to"),
                         ({}, "needs 'allow'"),
                         ({"allow": ["127.0.0.1:9"]}, "the sandbox was not started with")]:
        c = _control(pk.kc, "cellblock_network_request", content)["content"]
        assert c["status"] == "error" and c["ename"] == "NetworkPolicyError" and why in c["evalue"], \
            (content, c)
    r = execute(pk.kc, "print(1)")   # still the kernelspec's policy, still serving
    assert r.reply["metadata"]["cellblock"]["network"]["allow"] == [f"plain.test:{hosts['plain']}"]


def test_every_reply_carries_its_costs(pk, hosts):
    r = execute(pk.kc, GET + f"""
import time, os
junk = bytearray(60 << 20)
for i in range(0, len(junk), 4096): junk[i] = 1
t = time.process_time()
while time.process_time() - t < 0.3: pass
print('x' * 1000)
import sys; print('e' * 10, file=sys.stderr)
from IPython.display import display; display({{'text/plain': 'shown'}}, raw=True)
open('out.txt', 'w').write('y' * 5000)
print(get('http://plain.test:{hosts['plain']}/hello'), get('http://other.test:{hosts['other']}/hello'))
up = urllib.request.urlopen('http://plain.test:{hosts['plain']}/upload', data=b'u' * 20000,
                            timeout=20).read().decode()
print(up)
del junk
""")
    assert "got 20000" in r.stream("stdout"), r.stream("stdout")
    c = r.reply["metadata"]["cellblock"]["costs"]
    assert c["wall_s"] >= 0.3 and c["cpu_s"] >= 0.25, c
    assert c["memory_peak_bytes"] >= 60 << 20, c
    assert c["memory_peak_scope"] in ("cell", "sandbox") and c["memory_limit_bytes"] > 0, c
    if os.environ.get("CB_EXPECT_LIMITS") == "cgroup v2":
        # the test guest: the figures come from v2's own files (cpu.stat,
        # memory.peak, isolate/cgstat.c), the sandbox's group and no other
        assert c["cpu_source"] == "cgroup" and c["memory_limit_bytes"] == 1024 << 20, c
    assert c["stdout_bytes"] >= 1001 and c["stderr_bytes"] == 11 and c["display_bytes"] > 0, c
    assert c["files_written"] == 1 and c["files_bytes"] == 5000, c
    n = c["network"]
    plain = n[f"plain.test:{hosts['plain']}"]
    assert plain["connections"] == 2, n
    # both heads and the 20000-byte body went up; the replies came down
    assert 20000 < plain["bytes_up"] < 22000 and 0 < plain["bytes_down"] < 2000, n
    assert n[f"other.test:{hosts['other']}"]["bytes_up"] > 0, n   # its head, then the 403
    assert n[f"other.test:{hosts['other']}"]["refused"] == 1, n
    # a cell with nothing to do costs little, and its own counters start at zero
    c2 = execute(pk.kc, "pass").reply["metadata"]["cellblock"]["costs"]
    assert c2["stdout_bytes"] == 0 and c2["network"] == {} and c2["files_written"] == 0, c2
    if c["memory_peak_scope"] == "cell":
        assert c2["memory_peak_bytes"] < 60 << 20, c2


def test_a_refused_host_of_any_bytes_is_counted_under_its_escaped_name(pk, hosts):
    """The host a refusal is counted under is the sandbox's, any bytes: one
    that is not UTF-8 is counted under its escaped name (jansson drops a key
    that is not UTF-8, and its count went with it)."""
    r = execute(pk.kc, f"""
import socket
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'GET http://b\\xffd.test:{hosts['other']}/ HTTP/1.1\\r\\n\\r\\n')
print(s.recv(100).split(b' ')[1].decode())
s.close()
""")
    assert r.stream("stdout").strip() == "400", r.stream("stdout")   # not a valid host
    n = r.reply["metadata"]["cellblock"]["costs"]["network"]
    assert n.get(f"b\\377d.test:{hosts['other']}", {}).get("refused") == 1, n


def test_usage_request_answers_as_ipykernel_does_with_the_sandboxs_figures(pk):
    rep = _control(pk.kc, "usage_request", {})
    c = rep["content"]
    assert rep["msg_type"] == "usage_reply", rep["msg_type"]
    before = c["kernel_memory"]
    execute(pk.kc, "big = bytearray(80 << 20)\nfor i in range(0, len(big), 4096): big[i] = 1")
    after = _control(pk.kc, "usage_request", {})["content"]
    assert after["kernel_memory"] - before >= 70 << 20, (before, after)   # the sandbox's memory
    kernel_rss = int(open(f"/proc/{pk.pid}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    assert after["kernel_memory"] > kernel_rss + (60 << 20)              # not the kernel process's
    if os.environ.get("CB_EXPECT_LIMITS", "").startswith("cgroup"):
        assert after["cellblock"]["cgroup"] is True, after
        assert after["host_virtual_memory"]["total"] == 1024 << 20, after  # the sandbox's limit
    execute(pk.kc, "del big")
    with ipykernel() as control:
        ref = _control(control.kc, "usage_request", {})["content"]
    missing = set(ref) - set(after) - {"host_cpu_percent"}   # ipykernel omits it too at first
    assert not missing, missing
    assert set(ref["host_virtual_memory"]) >= {"total", "available", "percent", "used", "free"}
    assert set(after["host_virtual_memory"]) >= {"total", "available", "percent", "used", "free"}


def test_kernel_info_advertises_the_requests(pk):
    info = pk.kc.kernel_info(reply=True, timeout=30)["content"]
    assert {"cellblock_network_request", "usage_request"} <= set(info["cellblock_requests"])


def test_a_kernel_without_an_allowlist_says_why(hosts, tmp_path):
    k = AllowKernel(["--network", "none"], str(tmp_path / "none.log")).start()
    try:
        c = _control(k.kc, "cellblock_network_request", {"allow": ["pypi.org"]})["content"]
        assert c["status"] == "error" and "started with --network allow:" in c["evalue"], c
        meta = execute(k.kc, "print(1)").reply["metadata"]["cellblock"]
        assert meta["network"] == {"mode": "none", "allow": None, "generation": 0}
        assert "network" not in meta["costs"]
    finally:
        k.stop(check=True)


def test_a_notebook_changes_the_policy_between_cells(hosts):
    """nbclient runs a notebook; between its cells the frontend opens and
    closes a host, as a %pip cell would need; the notebook's state lives on."""
    import nbformat
    from nbclient import NotebookClient
    other = f"http://other.test:{hosts['other']}/hello"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(GET + "state = 'kept'\nprint(get(%r))" % other),
                nbformat.v4.new_code_cell("print(state, get(%r))" % other),
                nbformat.v4.new_code_cell("print(state, get(%r))" % other)]
    steps = [[f"other.test:{hosts['other']}"], None]

    replies = []

    async def between(cell, cell_index, **kw):
        if cell_index < 2:         # nbclient's client is asynchronous
            kc = client.kc
            msg = kc.session.msg("cellblock_network_request", {"allow": steps[cell_index]})
            kc.control_channel.send(msg)
            while True:
                rep = await kc.get_control_msg(timeout=30)
                if rep["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                    replies.append(rep["content"]["status"])
                    break

    client = NotebookClient(nb, kernel_name="cellblock", timeout=120,
                            on_cell_executed=between, resources={"metadata": {"path": "."}})
    client.km = client.create_kernel_manager()
    client.km.kernel_spec_manager = KernelSpecManager(
        kernel_dirs=[os.path.join(BUILD, "share", "jupyter", "kernels")])
    client.extra_arguments = _args(hosts)
    client.execute()
    outs = ["".join(o.get("text", "") for o in c.outputs).strip() for c in nb.cells]
    assert outs == ["403", "kept hello from", "kept 403"], outs
    assert replies == ["ok", "ok"], replies


def test_the_client_sets_the_network_and_exposes_costs(hosts):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client"))
    from cellblock import Sandbox
    with Sandbox(network=[f"plain.test:{hosts['plain']}"],
                 extra_args=["--network-resolve", "plain.test=127.0.0.1",
                             "--network-resolve", "other.test=127.0.0.1"]) as sb:
        ex = sb.run_code(GET + f"n = 1\nprint(get('http://other.test:{hosts['other']}/hello'))")
        assert ex.logs.stdout[0].strip() == "403" and ex.network["generation"] == 0
        assert ex.costs["network"][f"other.test:{hosts['other']}"]["refused"] == 1, ex.costs
        pol = sb.set_network([f"other.test:{hosts['other']}"])
        assert pol["allow"] == [f"other.test:{hosts['other']}"] and pol["generation"] == 1
        ex = sb.run_code(f"print(n, get('http://other.test:{hosts['other']}/hello'))")
        assert ex.logs.stdout[0].strip() == "1 hello from", ex.logs.stdout
        assert ex.costs["stdout_bytes"] > 0 and ex.network["generation"] == 1
        assert json.loads(ex.to_json())["costs"]["wall_s"] >= 0
        u = sb.usage()
        assert u["kernel_memory"] > 0 and "host_virtual_memory" in u
        with pytest.raises(ValueError, match="is not a host name"):
            sb.set_network(["a..b"])


def test_cellblock_run_json_reports_the_costs(hosts, tmp_path):
    r = subprocess.run([os.path.join(BUILD, "bin", "cellblock"), "run", "--json", *_args(hosts), "-"],
                       input=GET + f"print('z' * 100)\nprint(get('http://plain.test:{hosts['plain']}/hello'))",
                       capture_output=True, text=True, timeout=120)
    out = json.loads(r.stdout)
    c = out["costs"]
    assert c["stdout_bytes"] >= 101 and c["cpu_s"] is not None and c["sandbox_started"], c
    assert c["network"][f"plain.test:{hosts['plain']}"]["connections"] == 1, c
