#!/usr/bin/python3
"""podclient.py - the client side of tests/deploy/check_kube.py, run inside a
pod's network namespace (`nsenter --net=/proc/PID/ns/net python3 podclient.py
...`), so that everything it sends stays on that pod's loopback.  It prints
one JSON object with what it saw; check_kube.py asserts on it.

  podclient.py server URL TOKEN FILE SECRET
      a kernel of the pod's Jupyter Server over REST + WebSocket: the probe,
      a read of FILE (which the server holds, with SECRET in it), the banner
  podclient.py eg PORT PRIVATE_KEY_PEM
      Enterprise Gateway's part: listen on 127.0.0.1:PORT, decrypt the
      connection info the pod's launch_cellblock.py sends, drive the kernel
      with jupyter_client (probe, banner, interrupt), then EG's liveness poll
      and shutdown through the launcher's comm socket
"""
import base64
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RESPONSE_WAIT_S = 120
PROBE = r"""
import os
st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
print('uid', os.getuid(), 'caps', st['CapEff'].strip(), 'seccomp', st['Seccomp'].strip(),
      'nnp', st['NoNewPrivs'].strip())
print('procs', len([p for p in os.listdir('/proc') if p.isdigit()]))
print('ifaces', sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else 'nosys')
"""


def server(url, token, path, secret):
    from wsclient import RestKernel
    out = {}
    assert json.loads(_get(url, token, "/api/contents/" + os.path.basename(path)))["content"] == secret
    out["kernelspecs"] = sorted(json.loads(_get(url, token, "/api/kernelspecs"))["kernelspecs"])
    k = RestKernel(url, token)
    try:
        out["probe"] = k.run(PROBE)
        out["read"] = k.run("import glob\nfor p in glob.glob('/home/*/*') + [%r]:\n"
                            "    try: print(open(p).read())\n"
                            "    except OSError as e: print(type(e).__name__, p)" % path)
        out["banner"] = k.kernel_info()["banner"]
    finally:
        k.shutdown()
    out["kernels_after"] = json.loads(_get(url, token, "/api/kernels"))
    return out


def _get(url, token, path):
    import urllib.request
    req = urllib.request.Request(url + path, headers={"Authorization": "token " + token})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


def _decrypt(payload_b64, key):
    """EG's side of launcher protocol version 1."""
    from cryptography.hazmat.primitives import padding as sympadding
    from cryptography.hazmat.primitives.asymmetric import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    payload = json.loads(base64.b64decode(payload_b64))
    assert payload["version"] == 1, payload
    aes_key = key.decrypt(base64.b64decode(payload["key"]), padding.PKCS1v15())
    dec = Cipher(algorithms.AES(aes_key), modes.ECB()).decryptor()
    padded = dec.update(base64.b64decode(payload["conn_info"])) + dec.finalize()
    unpadder = sympadding.PKCS7(128).unpadder()
    return json.loads(unpadder.update(padded) + unpadder.finalize())


def _comm(info, request):
    with socket.create_connection((info["ip"], info["comm_port"]), timeout=10) as s:
        s.sendall(json.dumps(request).encode())


def eg(port, key_file):
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from jupyter_client import BlockingKernelClient
    with open(key_file, "rb") as f:
        key = load_pem_private_key(f.read(), None)
    out = {}
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(1)
        listener.settimeout(RESPONSE_WAIT_S)
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            data = b""
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
    info = _decrypt(data, key)
    out["info"] = {k: v for k, v in info.items() if k != "key"}
    out["key_len"] = len(info["key"])
    kc = BlockingKernelClient()
    kc.load_connection_info({k: info[k] for k in (
        "transport", "ip", "shell_port", "iopub_port", "stdin_port", "control_port", "hb_port",
        "key", "signature_scheme")})
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        msgs = []
        reply = kc.execute_interactive(PROBE, output_hook=msgs.append, timeout=60)
        out["probe"] = (reply["content"]["status"],
                        "".join(m["content"].get("text", "") for m in msgs if m["msg_type"] == "stream"))
        kc.kernel_info()
        out["banner"] = kc.get_shell_msg(timeout=30)["content"]["banner"]
        kc.execute_interactive("kept = 41", timeout=60)
        msg_id = kc.execute("while True: pass")
        time.sleep(1.0)
        kc.control_channel.send(kc.session.msg("interrupt_request", {}))   # interrupt_mode message
        while True:
            r = kc.get_shell_msg(timeout=30)
            if r["parent_header"].get("msg_id") == msg_id:
                break
        out["interrupt"] = r["content"].get("ename")
        msgs = []
        kc.execute_interactive("kept + 1", output_hook=msgs.append, timeout=60)
        out["after"] = [m["content"]["data"]["text/plain"] for m in msgs
                        if m["msg_type"] == "execute_result"]
    finally:
        kc.stop_channels()
    _comm(info, {"signum": 0})          # EG's liveness poll
    _comm(info, {"shutdown": 1})
    return out


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    result = server(*args) if cmd == "server" else eg(*args)
    print(json.dumps(result))
