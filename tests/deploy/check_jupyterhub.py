"""JupyterHub with cellblock, for real (run by `make deploy-check`; needs root).

Debian's jupyterhub 3 and configurable-http-proxy from npm (deploy/hub), on
127.0.0.1, with deploy/hub/jupyterhub_config.py as it ships: PAM login,
LocalProcessSpawner, single-user Jupyter Servers whose only kernel is
cellblock, installed with `make install PREFIX=<a staging dir every user can
read>`.  Two throwaway users log in (username + password, REST), start their
servers, and run cells through the hub's proxy (REST + WebSocket).

What it shows:
  - each server offers cellblock alone, and runs as its user;
  - user A's kernel cannot read user B's file nor the hub's database, though
    both are left readable on the host on purpose (B's home 0755, the file
    0644; the hub directory 0755, the database 0644): the control is the
    same read by an unsandboxed process of user A, which succeeds, and by B
    itself; so only the sandbox stands between A's code and those files;
  - A's kernel cannot write into A's own home on the host (A itself can);
  - everything is removed afterwards: servers, proxy, hub, users, files.
"""
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from .conftest import REPO, SYS_PYTHON, free_port, skip_or_fail
from .wsclient import RestKernel

HUB_DIR_PARENT = "/var/tmp"      # the staging dir must be reachable by every user
HUB_START_S = 90
SERVER_START_S = 120
USERS = 2


def _run(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


RUNUSER = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin") or "runuser"


def _runuser(user, argv, timeout=60):
    return subprocess.run([RUNUSER, "-u", user, "--"] + argv, capture_output=True, text=True,
                          timeout=timeout, cwd="/", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})


def _pids_of_uid(uid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.stat("/proc/" + p).st_uid == uid:
                    out.append(int(p))
            except OSError:
                pass
    return out


def _hub_api(base, path, method="GET", body=None, token=None, timeout=30):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "token " + token
    req = urllib.request.Request(base + path, method=method, headers=headers,
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=timeout) as r:
        data = r.read()
    return r.status, (json.loads(data) if data else None)


@pytest.fixture(scope="module")
def hub():
    if os.geteuid() != 0:
        skip_or_fail("the hub spawns servers as other users: run as root")
    for tool in ("jupyterhub", "useradd", "chpasswd", "runuser", "npm", "node"):
        if not shutil.which(tool) and not shutil.which(tool, path="/usr/sbin:/sbin"):
            skip_or_fail(tool + " not found (make deploy-check installs jupyterhub and npm deps)")
    stage = tempfile.mkdtemp(prefix="cellblock-hub-", dir=HUB_DIR_PARENT)
    os.chmod(stage, 0o755)
    users, procs = [], []
    hub_proc = None
    try:
        # cellblock, installed where every user can execute it
        _run(["make", "-s", "-C", REPO, "install", "PREFIX=" + stage + "/prefix"])
        # configurable-http-proxy from npm, pinned by deploy/hub/package-lock.json
        chp_dir = os.path.join(stage, "chp")
        shutil.copytree(os.path.join(REPO, "deploy", "hub"), chp_dir,
                        ignore=shutil.ignore_patterns("node_modules", "*.py"))
        _run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=chp_dir, timeout=600)
        chp = os.path.join(chp_dir, "node_modules", ".bin", "configurable-http-proxy")
        # two users with system passwords (PAM)
        for _ in range(USERS):
            name = "cbhub" + secrets.token_hex(3)
            pw = secrets.token_urlsafe(18)
            _run(["useradd", "--create-home", "--shell", "/bin/bash", name])
            users.append({"name": name, "password": pw})
            _run(["chpasswd"], input="%s:%s\n" % (name, pw))
            ent = pwd.getpwnam(name)
            users[-1].update(uid=ent.pw_uid, gid=ent.pw_gid, home=ent.pw_dir)
        hub_dir = os.path.join(stage, "hub")
        os.mkdir(hub_dir)
        os.chmod(hub_dir, 0o755)      # loose on purpose: only the sandbox may stop the read
        port = free_port()
        while any(_port_busy(p) for p in (port + 1, port + 2)):
            port = free_port()
        env = dict(os.environ, CELLBLOCK_PREFIX=stage + "/prefix", CELLBLOCK_HUB_DIR=hub_dir,
                   CELLBLOCK_HUB_USERS=",".join(u["name"] for u in users),
                   CELLBLOCK_HUB_PORT=str(port), CELLBLOCK_CHP=chp)
        log = open(os.path.join(stage, "hub.log"), "wb")
        hub_proc = subprocess.Popen(
            [SYS_PYTHON, "-m", "jupyterhub", "-f",
             os.path.join(REPO, "deploy", "hub", "jupyterhub_config.py")],
            cwd=hub_dir, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        base = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + HUB_START_S
        while True:
            try:
                _hub_api(base, "/hub/api/", timeout=2)
                break
            except (OSError, urllib.error.URLError):
                if hub_proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("hub did not come up:\n" + _tail(stage))
                time.sleep(0.5)
        db = os.path.join(hub_dir, "jupyterhub.sqlite")
        os.chmod(db, 0o644)
        yield {"base": base, "users": users, "db": db, "stage": stage, "proc": hub_proc}
    finally:
        if hub_proc is not None and hub_proc.poll() is None:
            hub_proc.send_signal(signal.SIGTERM)    # cleanup_servers: it stops the servers
            try:
                hub_proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(hub_proc.pid, signal.SIGKILL)
                hub_proc.wait()
        if hub_proc is not None:
            # the proxy runs in the hub's session; anything left of it goes by pid
            for p in _session_pids(hub_proc.pid):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        for u in users:
            for p in _pids_of_uid(u["uid"]):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            subprocess.run(["userdel", "--remove", u["name"]], capture_output=True)
        shutil.rmtree(stage, ignore_errors=True)


def _port_busy(port):
    import socket
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _session_pids(sid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[3]) == sid:     # session id
                    out.append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _tail(stage):
    try:
        with open(os.path.join(stage, "hub.log"), "rb") as f:
            return f.read().decode(errors="replace")[-5000:]
    except OSError:
        return ""


def _login_and_spawn(hub, user):
    """Logs in with username + password (REST), starts the user's server, returns its token."""
    st, tok = _hub_api(hub["base"], "/hub/api/users/%s/tokens" % user["name"], "POST",
                       {"auth": {"username": user["name"], "password": user["password"]},
                        "note": "deploy-check"})
    token = tok["token"]
    try:
        _hub_api(hub["base"], "/hub/api/users/%s/server" % user["name"], "POST", {}, token)
    except urllib.error.HTTPError as e:
        if e.code != 400:      # 400: already running
            raise
    deadline = time.monotonic() + SERVER_START_S
    while True:
        _, info = _hub_api(hub["base"], "/hub/api/users/" + user["name"], token=token)
        srv = info.get("servers", {}).get("", {})
        if srv.get("ready"):
            return token
        if time.monotonic() > deadline:
            raise AssertionError("server of %s not ready:\n%s" % (user["name"], _tail(hub["stage"])))
        time.sleep(0.5)


def test_wrong_password_is_refused(hub):
    u = hub["users"][0]
    with pytest.raises(urllib.error.HTTPError) as e:
        _hub_api(hub["base"], "/hub/api/users/%s/tokens" % u["name"], "POST",
                 {"auth": {"username": u["name"], "password": "wrong" + u["password"]}})
    assert e.value.code == 403


def test_two_users_cellblock_only_and_isolated(hub):
    a, b = hub["users"]
    for u in (a, b):
        u["token"] = _login_and_spawn(hub, u)
        u["url"] = hub["base"] + "/user/" + u["name"]

    # B's secret, readable on the host by anyone (loose on purpose)
    secret = secrets.token_hex(16)
    b_file = os.path.join(b["home"], "secret-" + secrets.token_hex(4) + ".txt")
    with open(b_file, "w") as f:
        f.write(secret)
    os.chown(b_file, b["uid"], b["gid"])
    os.chmod(b_file, 0o644)
    os.chmod(b["home"], 0o755)
    with open(hub["db"], "rb") as f:
        db_head = f.read(16)
    assert db_head.startswith(b"SQLite format 3"), db_head

    # controls: without the sandbox, A reads both, and B reads its own file
    r = _runuser(a["name"], ["cat", b_file])
    assert r.stdout == secret, ("control: A's plain process should read B's file", r.stderr)
    r = _runuser(a["name"], ["head", "-c", "15", hub["db"]])
    assert r.stdout == "SQLite format 3", ("control: A's plain process should read the hub db", r.stderr)
    assert _runuser(b["name"], ["cat", b_file]).stdout == secret

    kernels = []
    try:
        for u in (a, b):
            # the server runs as its user and offers cellblock alone
            k = RestKernel(u["url"], u["token"])
            kernels.append(k)
            specs = k.rest("/api/kernelspecs")
            assert sorted(specs["kernelspecs"]) == ["cellblock"], specs["kernelspecs"].keys()
            st, out = k.run("import os\nprint(os.getuid(), os.getcwd())\n6 * 7")
            assert st == "ok" and out.endswith("42"), out
            # once the sandbox is up the banner says what is in force: a user namespace
            # (the server is not root), and DEGRADED limits (nobody delegated a cgroup)
            banner = k.kernel_info()["banner"]
            assert "cellblock sandbox" in banner and "namespaces user," in banner, banner
        ka, kb = kernels

        # A's code: B's file and the hub's database are out of reach
        probe = """
import os
for p in [%r, %r, %r]:
    try:
        with open(p, 'rb') as f: print('READ', p, f.read(64))
    except OSError as e: print('DENIED', p, type(e).__name__)
for d in ['/home', %r, %r]:
    try: print('LIST', d, os.listdir(d))
    except OSError as e: print('NOLIST', d, type(e).__name__)
""" % (b_file, hub["db"], os.path.join(hub["stage"], "hub", "jupyterhub_cookie_secret"),
       b["home"], os.path.dirname(hub["db"]))
        st, out = ka.run(probe)
        assert st == "ok", out
        assert secret not in out and "SQLite" not in out, out
        assert "READ" not in out, out
        listed = "\n".join(l for l in out.splitlines() if l.startswith("LIST"))
        assert os.path.basename(b_file) not in listed and "jupyterhub.sqlite" not in listed, out
        assert b["name"] not in listed, out          # B's home is not even there

        # A's code cannot leave anything in A's real home either
        marker = os.path.join(a["home"], "written-" + secrets.token_hex(4))
        ka.run("try:\n    open(%r, 'w').write('x')\nexcept OSError as e:\n    print(type(e).__name__)" % marker)
        assert not os.path.exists(marker), "a sandboxed write reached the user's home"
        r = _runuser(a["name"], ["touch", marker])      # control: A itself can
        assert r.returncode == 0 and os.path.exists(marker), r.stderr

        # B's kernel works through the proxy too, and sees nothing of A
        st, out = kb.run("import os\nprint(sorted(os.listdir('/home')))")
        assert st == "ok" and a["name"] not in out, out
        # each server's processes belong to its user
        for u in (a, b):
            assert _pids_of_uid(u["uid"]), "no process of %s: the server is not theirs" % u["name"]
    finally:
        for k in kernels:
            try:
                k.shutdown()
            except Exception:  # noqa: BLE001 (teardown goes on; the fixture kills the rest)
                pass
    # stopping a user's server through the hub leaves none of their processes
    for u in (a, b):
        _hub_api(hub["base"], "/hub/api/users/%s/server" % u["name"], "DELETE", None, u["token"])
    deadline = time.monotonic() + 30
    while any(_pids_of_uid(u["uid"]) for u in (a, b)) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = {u["name"]: _pids_of_uid(u["uid"]) for u in (a, b)}
    assert not any(left.values()), "processes left after the servers stopped: %r" % left
