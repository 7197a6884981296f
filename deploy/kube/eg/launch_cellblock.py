#!/usr/bin/python3
"""launch_cellblock.py - the kernel launcher Jupyter Enterprise Gateway runs in
a kernel pod, for cellblock.

Enterprise Gateway (EG) starts a pod per kernel and waits for the pod to tell
it where the kernel listens.  This program does that, then runs
cellblock-kernel and stays beside it as EG's contact in the pod:

  1. picks five ZMQ ports (within --port-range when given), writes a
     connection file with a fresh HMAC key, for the pod's address
     (--ip, else $POD_IP from the downward API, else this host's name);
  2. opens the "comm" socket EG later sends requests to;
  3. sends the connection info to --response-address, encrypted the way
     EG's launchers do (launcher protocol version 1): the JSON is encrypted
     with a fresh AES-128 key (ECB, PKCS#7 padding), that key with EG's RSA
     public key (--public-key, base64 DER; PKCS#1 v1.5), and
     {"version": 1, "key": ..., "conn_info": ...} is sent base64-encoded;
  4. starts `cellblock-kernel -f CONNECTION_FILE [KERNEL ARGS...]` (the
     arguments after `--` are passed on: limits such as --memory 1024);
  5. serves the comm socket: {"signum": N} signals the kernel (0 is EG's
     liveness poll), {"shutdown": 1} ends it; exits with the kernel's status
     when the kernel exits.

Written for cellblock from EG's documented launcher contract; it needs
python3-cryptography.  Usage (in a kernel pod the four values come from the
environment EG gives the container: KERNEL_ID, RESPONSE_ADDRESS, PUBLIC_KEY,
PORT_RANGE; the options override them):

  launch_cellblock.py [--kernel-id ID] [--response-address HOST:PORT]
      [--public-key KEY] [--port-range LOW..HIGH] [--ip IP] [-- KERNEL ARGS...]
"""
import argparse
import base64
import json
import logging
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time

from cryptography.hazmat.primitives import padding as sympadding
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.serialization import load_der_public_key

LAUNCHER_VERSION = 1          # EG's launcher payload format
KERNEL = os.environ.get("CELLBLOCK_KERNEL", "cellblock-kernel")
AES_KEY_BYTES = 16
AES_BLOCK_BITS = 128
PORT_TRIES = 32               # random picks within --port-range before giving up
COMM_ACCEPT_S = 1.0           # comm socket wait, so kernel exit is noticed promptly
COMM_REQUEST_MAX = 64 * 1024  # bytes of one request from EG
SHUTDOWN_GRACE_S = 5.0        # SIGTERM -> SIGKILL for the kernel
RESPONSE_RETRY_S = 30.0       # EG's response address may answer only once the pod network is up
RESPONSE_RETRY_STEP_S = 0.2
CHANNELS = ("shell", "iopub", "stdin", "control", "hb")

log = logging.getLogger("launch_cellblock")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # EG passes these with a RemoteProcessProxy. prefix in its kernelspecs; accept both
    # in a kernel pod EG passes them in the environment (launch_kubernetes.py adds
    # KERNEL_ID, RESPONSE_ADDRESS, PUBLIC_KEY, PORT_RANGE to the container's env)
    for name, env in (("kernel-id", "KERNEL_ID"), ("response-address", "RESPONSE_ADDRESS"),
                      ("public-key", "PUBLIC_KEY"), ("port-range", "PORT_RANGE")):
        ap.add_argument("--" + name, "--RemoteProcessProxy." + name, dest=name.replace("-", "_"),
                        default=os.environ.get(env, ""))
    ap.add_argument("--ip", default=os.environ.get("POD_IP") or "")
    ap.add_argument("--connection-dir", default=os.environ.get("CELLBLOCK_CONNECTION_DIR") or "")
    ap.add_argument("--spark-context-initialization-mode",
                    "--RemoteProcessProxy.spark-context-initialization-mode",
                    dest="spark_mode", default="none", help="accepted and ignored (no Spark)")
    ap.add_argument("kernel_args", nargs="*", help="after --: passed to cellblock-kernel")
    a = ap.parse_args(argv)
    if not a.kernel_id or not a.response_address or not a.public_key:
        ap.error("--kernel-id, --response-address and --public-key (or KERNEL_ID, "
                 "RESPONSE_ADDRESS, PUBLIC_KEY) are required")
    return a


def port_range(text):
    if not text:
        return 0, 0
    lo, hi = (int(x) for x in text.split(".."))
    if lo == hi == 0:            # EG's "no range"
        return 0, 0
    if not 0 < lo <= hi < 65536:
        raise ValueError("bad --port-range %r" % text)
    return lo, hi


def bind_socket(ip, lo, hi):
    """A TCP socket bound to a free port (in lo..hi when given)."""
    for _ in range(PORT_TRIES if hi else 1):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((ip, random.randint(lo, hi) if hi else 0))
            return s
        except OSError:
            s.close()
    raise RuntimeError("no free port in %d..%d after %d tries" % (lo, hi, PORT_TRIES))


def write_connection_file(path, ip, ports, key):
    info = {"transport": "tcp", "ip": ip, "signature_scheme": "hmac-sha256", "key": key,
            "kernel_name": "cellblock"}
    for ch, p in zip(CHANNELS, ports):
        info[ch + "_port"] = p
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f)
    return info


def encrypt_payload(info, public_key_b64):
    aes_key = secrets.token_bytes(AES_KEY_BYTES)
    padder = sympadding.PKCS7(AES_BLOCK_BITS).padder()
    plain = padder.update(json.dumps(info).encode()) + padder.finalize()
    enc = Cipher(algorithms.AES(aes_key), modes.ECB()).encryptor()
    conn_info = enc.update(plain) + enc.finalize()
    rsa = load_der_public_key(base64.b64decode(public_key_b64))
    wrapped = rsa.encrypt(aes_key, padding.PKCS1v15())
    payload = {"version": LAUNCHER_VERSION, "key": base64.b64encode(wrapped).decode(),
               "conn_info": base64.b64encode(conn_info).decode()}
    return base64.b64encode(json.dumps(payload).encode())


def send_connection_info(address, payload):
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + RESPONSE_RETRY_S
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=RESPONSE_RETRY_S) as s:
                s.sendall(payload)
            return
        except (ConnectionRefusedError, socket.timeout):
            if time.monotonic() > deadline:
                raise
            time.sleep(RESPONSE_RETRY_STEP_S)


def read_request(conn):
    data = b""
    while len(data) <= COMM_REQUEST_MAX:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    if len(data) > COMM_REQUEST_MAX:
        raise ValueError("request larger than %d bytes" % COMM_REQUEST_MAX)
    return json.loads(data.decode()) if data else None


def stop_kernel(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(SHUTDOWN_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve(comm, proc):
    """EG's requests until shutdown or the kernel's exit; returns the exit status."""
    comm.settimeout(COMM_ACCEPT_S)
    while proc.poll() is None:
        try:
            conn, _ = comm.accept()
        except socket.timeout:
            continue
        with conn:
            conn.settimeout(COMM_ACCEPT_S)
            try:
                req = read_request(conn)
            except (OSError, ValueError) as e:
                log.warning("bad request on the comm socket: %s", e)
                continue
        if not isinstance(req, dict):
            continue
        if req.get("signum") is not None:
            signum = int(req["signum"])
            if signum:
                log.info("signal %d to the kernel", signum)
            if proc.poll() is None:
                proc.send_signal(signum)
        if req.get("shutdown"):
            log.info("shutdown requested")
            stop_kernel(proc)
    return proc.wait()


def main(argv=None):
    logging.basicConfig(format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s",
                        level=os.environ.get("LOG_LEVEL", "INFO"))
    a = parse_args(sys.argv[1:] if argv is None else argv)
    lo, hi = port_range(a.port_range)
    ip = a.ip or socket.gethostbyname(socket.gethostname())
    # the ZMQ ports: held while chosen so no two are the same, released for the kernel
    held = [bind_socket(ip, lo, hi) for _ in CHANNELS]
    ports = [s.getsockname()[1] for s in held]
    for s in held:
        s.close()
    conn_dir = a.connection_dir or tempfile.mkdtemp(prefix="cellblock-eg-")
    conn_file = os.path.join(conn_dir, "kernel-%s.json" % a.kernel_id)
    info = write_connection_file(conn_file, ip, ports, secrets.token_hex(32))
    comm = bind_socket(ip, lo, hi)
    comm.listen(1)
    # the kernel first, so the pid EG gets is the kernel's and it is listening soon
    proc = subprocess.Popen([KERNEL, "-f", conn_file] + a.kernel_args, stdin=subprocess.DEVNULL)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, f: stop_kernel(proc))
    reply = dict(info, pid=proc.pid, pgid=os.getpgid(proc.pid), comm_port=comm.getsockname()[1],
                 kernel_id=a.kernel_id)
    try:
        send_connection_info(a.response_address, encrypt_payload(reply, a.public_key))
    except OSError as e:
        log.error("cannot send the connection info to %s: %s", a.response_address, e)
        stop_kernel(proc)
        return 1
    log.info("kernel %s (pid %d) on %s, ports %s, comm %d", a.kernel_id, proc.pid, ip, ports,
             reply["comm_port"])
    started = time.monotonic()
    status = serve(comm, proc)
    log.info("kernel exited with %s after %.0f s", status, time.monotonic() - started)
    try:
        os.unlink(conn_file)
    except OSError:
        pass
    return 0 if status in (0, -signal.SIGTERM) else 1


if __name__ == "__main__":
    sys.exit(main())
