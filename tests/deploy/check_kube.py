"""The Kubernetes manifests of deploy/kube, run with `podman kube play` (run by
`make deploy-check`; needs root, podman and the image from
deploy/container/build.sh).

The pods run as written: a user namespace per pod (hostUsers: false, which
podman maps to --userns=auto: /etc/subuid needs a "containers" range), uid
1000, no capabilities, no_new_privs, the Localhost seccomp profile, a
read-only root, /proc unmasked, the resources given.  Two things differ
from a cluster, both said here and in docs/DEPLOY.md:
  - podman 4.3 ignores `procMount`; the check passes the annotation
    io.cellblock.procMount=Unmasked for containers whose YAML asks for it, and
    a precreate OCI hook (deploy/kube/podman) drops the /proc masks, as
    containerd and CRI-O do for procMount: Unmasked;
  - the pods get no network but their own loopback (--network none); the
    test's clients enter the pod's network namespace (nsenter, like a
    sidecar), so nothing leaves loopback.

Checked: podman applied the securityContext and resources (podman inspect);
the kernel answers and confines (no capabilities, seccomp, uid 65534, its own
pid namespace, no /sys, a file the server holds is invisible to it - the
control is the server serving that file); the banner says DEGRADED (no
writable cgroup in the pod here); the Node.js agent works against the pod;
EG's kernel pod hands its connection info over (launcher protocol 1), runs
with the template's limits, interrupts, and ends on EG's shutdown request.
"""
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from .conftest import REPO, skip_or_fail

IMAGE = os.environ.get("CELLBLOCK_IMAGE", "localhost/cellblock:latest")
KUBE = os.path.join(REPO, "deploy", "kube")
SECCOMP = os.path.join(REPO, "deploy", "container", "seccomp.json")
CONTAINERS_CONF = os.path.join(REPO, "deploy", "container", "containers.conf")
HOOK = os.path.join(KUBE, "podman", "procmount-unmasked.py")
PODCLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "podclient.py")
SYS_PYTHON = "/usr/bin/python3"
POD_START_S = 120
CLIENT_S = 300
NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"


def podman(*args, check=True, timeout=300, global_args=()):
    env = dict(os.environ, CONTAINERS_CONF=os.environ.get("CONTAINERS_CONF", CONTAINERS_CONF))
    r = subprocess.run(["podman"] + list(global_args) + list(args), capture_output=True,
                       text=True, env=env, timeout=timeout)
    if check and r.returncode:
        raise AssertionError("podman %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
    return r


@pytest.fixture(scope="module")
def kube_env():
    if os.geteuid() != 0:
        skip_or_fail("podman kube play as root (rootless podman is not what is set up here)")
    if not shutil.which("podman"):
        skip_or_fail("podman not installed (make deploy-check installs it)")
    if podman("image", "exists", IMAGE, check=False).returncode:
        skip_or_fail("image %s missing: sh deploy/container/build.sh" % IMAGE)
    with open("/etc/subuid") as f:
        if not any(l.startswith("containers:") for l in f):
            skip_or_fail("/etc/subuid has no 'containers' range (hostUsers: false); "
                         "deploy/check.sh adds it")
    d = tempfile.mkdtemp(prefix="cellblock-kube-")
    shutil.copy(SECCOMP, os.path.join(d, "cellblock.json"))   # <seccomp root>/cellblock.json
    os.mkdir(os.path.join(d, "hooks"))
    with open(os.path.join(d, "hooks", "procmount-unmasked.json"), "w") as f:
        json.dump({"version": "1.0.0", "hook": {"path": HOOK},
                   "when": {"annotations": {r"^io\.cellblock\.procMount$": "^Unmasked$"}},
                   "stages": ["precreate"]}, f)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def play(kube_env, pod):
    import yaml
    path = os.path.join(kube_env, pod["metadata"]["name"] + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(pod, f)
    args = ["kube", "play", "--network", "none", "--seccomp-profile-root", kube_env]
    if any((c.get("securityContext") or {}).get("procMount") == "Unmasked"
           for c in pod["spec"]["containers"]):
        args += ["--annotation", "io.cellblock.procMount=Unmasked"]
    podman(*(args + [path]), global_args=["--hooks-dir", os.path.join(kube_env, "hooks")])
    return path


def down(path, name):
    r = podman("kube", "down", path, check=False)
    # podman 4.3's kube down can leave an empty pod when its containers had exited already
    if podman("pod", "exists", name, check=False).returncode == 0:
        podman("pod", "rm", "--force", name, check=False)
    return r


def container(pod_name):
    """podman inspect of the pod's one workload container (not the infra one)."""
    ids = podman("ps", "-a", "-q", "--filter", "pod=" + pod_name).stdout.split()
    infos = [json.loads(podman("inspect", i).stdout)[0] for i in ids]
    work = [i for i in infos if not i.get("IsInfra")]
    assert len(work) == 1, [i.get("Name") for i in infos]
    return work[0]


def wait_running(pod_name):
    deadline = time.monotonic() + POD_START_S
    while time.monotonic() < deadline:
        info = container(pod_name)
        if info["State"]["Running"] and info["State"]["Pid"]:
            return info
        if info["State"]["Status"] == "exited":
            break
        time.sleep(0.3)
    r = podman("logs", info["Id"], check=False)
    raise AssertionError("pod %s not running: %s%s" % (pod_name, r.stdout[-3000:], r.stderr[-3000:]))


def in_pod_net(pid, argv, timeout=CLIENT_S, env=None, cwd=None):
    return subprocess.run([NSENTER, "--net=/proc/%d/ns/net" % pid] + argv, capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=cwd)


def assert_security_honoured(info, memory_bytes):
    """What podman made of the pod's securityContext and resources."""
    cfg, host = info["Config"], info["HostConfig"]
    assert cfg["User"] in ("1000:1000", "1000"), cfg["User"]
    assert not info["EffectiveCaps"], info["EffectiveCaps"]
    opts = host.get("SecurityOpt") or []
    assert any("no-new-privileges" in o for o in opts), opts
    # the profile itself: podman's default refuses sethostname without CAP_SYS_ADMIN, ours
    # allows it; the OCI config podman handed to runc says which one is in force
    with open(os.path.join(info["StaticDir"], "config.json")) as f:
        seccomp = json.load(f)["linux"]["seccomp"]
    allowed = {n for r in seccomp["syscalls"] if r["action"] == "SCMP_ACT_ALLOW" and not r.get("args")
               for n in r["names"]}
    assert {"sethostname", "mount", "pivot_root", "unshare"} <= allowed, "not cellblock.json"
    assert host["ReadonlyRootfs"] is True
    assert host["Memory"] == memory_bytes, host["Memory"]
    with open("/proc/%d/uid_map" % info["State"]["Pid"]) as f:
        first = f.read().split()
    assert first[0] == "0" and first[1] != "0", "the pod is not in a user namespace: %r" % first


def assert_confined(status, out, where):
    assert status == "ok", (where, out)
    assert "uid 65534 caps 0000000000000000 seccomp 2 nnp 1" in out, (where, out)
    assert "nosys" in out, (where, out)                       # no /sys in the sandbox
    nprocs = int(out.split("procs", 1)[1].split()[0])
    assert nprocs <= 4, (where, "sees %d processes: not its own pid namespace" % nprocs, out)


def test_jupyter_server_pod(kube_env):
    import yaml
    with open(os.path.join(KUBE, "jupyter-server-pod.yaml")) as f:
        pod = yaml.safe_load(f)
    token = secrets.token_hex(24)
    name = "cellblock-user-" + secrets.token_hex(3)
    pod["metadata"]["name"] = name
    c = pod["spec"]["containers"][0]
    c["env"] = [{"name": "JUPYTER_TOKEN", "value": token}]
    c["ports"] = []                              # --network none: reached through nsenter
    url = "http://127.0.0.1:8888"
    path = os.path.join(kube_env, name + ".yaml")
    try:
        play(kube_env, pod)
        info = wait_running(name)
        pid = info["State"]["Pid"]
        assert_security_honoured(info, 4 << 30)
        deadline = time.monotonic() + POD_START_S
        while in_pod_net(pid, ["curl", "-sf", "-H", "Authorization: token " + token,
                               url + "/api/status"], timeout=10).returncode:
            assert time.monotonic() < deadline, podman("logs", info["Id"], check=False).stderr[-3000:]
            time.sleep(0.5)
        # a file the user's server holds (written as the pod's user, in its home)
        secret = secrets.token_hex(16)
        fname = "notes-%s.txt" % secrets.token_hex(4)
        home = podman("exec", info["Id"], "sh", "-c", 'printf %s "$HOME"').stdout
        assert home.startswith("/"), home
        path = home.rstrip("/") + "/" + fname
        podman("exec", info["Id"], "sh", "-c", "printf %s " + secret + " > " + path)
        r = in_pod_net(pid, [SYS_PYTHON, PODCLIENT, "server", url, token, path, secret])
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout)
        assert out["kernelspecs"] == ["cellblock"], out
        assert_confined(*out["probe"], "server pod")
        st, text = out["read"]
        assert secret not in text and "FileNotFoundError " + path in text, text
        # no writable cgroup in the pod here: the banner must say DEGRADED
        assert "namespaces user,pid,mount" in out["banner"] and "DEGRADED limits" in out["banner"], out
        assert out["kernels_after"] == []

        # the Node.js agent, against the pod (an HTTP client in another language)
        agent_dir = os.path.join(REPO, "examples", "node-agent")
        node = shutil.which("node")
        if not node or not os.path.isdir(os.path.join(agent_dir, "node_modules", "@jupyterlab")):
            skip_or_fail("node or examples/node-agent/node_modules missing (npm ci there)")
        with tempfile.TemporaryDirectory() as out_dir:
            r = in_pod_net(pid, [node, "agent.mjs", out_dir], cwd=agent_dir,
                           env=dict(os.environ, JUPYTER_URL=url, JUPYTER_TOKEN=token))
            assert r.returncode == 0, (r.stdout, r.stderr)
            assert sorted(os.listdir(out_dir)) == ["chart.png", "sales.csv"]
    finally:
        down(path, name)
    assert podman("pod", "exists", name, check=False).returncode != 0, "pod left behind"


def test_enterprise_gateway_kernel_pod(kube_env):
    import jinja2
    import yaml
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import (
        Encoding, NoEncryption, PrivateFormat, PublicFormat)
    import base64
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file = os.path.join(kube_env, "eg-key.pem")
    with open(key_file, "wb") as f:
        f.write(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    pub = base64.b64encode(key.public_key().public_bytes(
        Encoding.DER, PublicFormat.SubjectPublicKeyInfo)).decode()
    kernel_id = str(uuid.uuid4())
    name = "kernel-" + kernel_id[:8]
    port = 47123                     # in the pod's own network namespace: nothing else there
    # as EG's launch_kubernetes.py does: KERNEL_* variables as keywords, jinja2 with
    # trim_blocks/lstrip_blocks, then its own environment appended to the container's env
    env = {"KERNEL_ID": kernel_id, "KERNEL_POD_NAME": name, "KERNEL_NAMESPACE": "default",
           "KERNEL_IMAGE": IMAGE, "KERNEL_MEMORY_MB": "640"}
    with open(os.path.join(KUBE, "eg", "kernel-pod.yaml.j2")) as f:
        text = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(
            f.read()).render(**{k.lower(): yaml.safe_load(v) for k, v in env.items()})
    pod = yaml.safe_load(text)
    env.update(RESPONSE_ADDRESS="127.0.0.1:%d" % port, PUBLIC_KEY=pub, PORT_RANGE="0..0")
    c = pod["spec"]["containers"][0]
    # the pod's own address: on this machine its loopback (no pod network, see above)
    c["env"] = [{"name": "POD_IP", "value": "127.0.0.1"}] + \
        [{"name": k, "value": v} for k, v in env.items()]
    path = os.path.join(kube_env, name + ".yaml")
    try:
        play(kube_env, pod)
        info = wait_running(name)
        assert_security_honoured(info, 1 << 30)
        r = in_pod_net(info["State"]["Pid"], [SYS_PYTHON, PODCLIENT, "eg", str(port), key_file])
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout)
        assert out["info"]["kernel_id"] == kernel_id and out["info"]["ip"] == "127.0.0.1", out
        assert out["info"]["signature_scheme"] == "hmac-sha256" and out["key_len"] >= 32, out
        assert_confined(*out["probe"], "EG kernel pod")
        # the template's kernel limits reach the kernel (--memory 640: RLIMIT_AS, DEGRADED here)
        assert "address space 640 MiB" in out["banner"] or "memory 640 MiB" in out["banner"], out
        assert out["interrupt"] == "KeyboardInterrupt" and out["after"] == ["42"], out
        # EG's shutdown request ends the kernel, so the pod's container exits
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and container(name)["State"]["Running"]:
            time.sleep(0.5)
        state = container(name)["State"]
        assert not state["Running"] and state["ExitCode"] == 0, state
    finally:
        down(path, name)
    assert podman("pod", "exists", name, check=False).returncode != 0, "pod left behind"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
