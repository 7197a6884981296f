"""A small Jupyter kernel client over Jupyter Server's REST + WebSocket API
(the JSON wire format of /api/kernels/{id}/channels), for the deploy checks
that go through a proxy (JupyterHub) or into a pod.  websocket-client
(Debian python3-websocket) carries the frames; urllib the REST calls.
"""
import json
import time
import urllib.request
import uuid

import websocket

WS_TIMEOUT_S = 60


class RestKernel:
    """One kernel started through REST, driven through its channels WebSocket."""

    def __init__(self, base, token, name="cellblock"):
        self.base, self.token = base.rstrip("/"), token
        self.id = self.rest("/api/kernels", "POST", {"name": name})["id"]
        ws_url = self.base.replace("http", "ws", 1) + "/api/kernels/%s/channels" % self.id
        self.ws = websocket.create_connection(ws_url, timeout=WS_TIMEOUT_S,
                                              header=["Authorization: token " + token])
        self.session = uuid.uuid4().hex

    def rest(self, path, method="GET", body=None, timeout=60):
        req = urllib.request.Request(self.base + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "token " + self.token,
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            data = r.read()
        return json.loads(data) if data else None

    def request(self, channel, msg_type, content):
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": msg_type, "session": self.session,
                       "username": "deploy-check", "version": "5.3",
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            "parent_header": {}, "metadata": {}, "content": content, "channel": channel,
            "buffers": []}))
        return msg_id

    def kernel_info(self, timeout=WS_TIMEOUT_S):
        msg_id = self.request("shell", "kernel_info_request", {})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = json.loads(self.ws.recv())
            if m.get("parent_header", {}).get("msg_id") == msg_id and \
                    m["msg_type"] == "kernel_info_reply":
                return m["content"]
        raise AssertionError("no kernel_info_reply in %s s" % timeout)

    def run(self, code, timeout=WS_TIMEOUT_S):
        """(status, text): stdout/stderr/results/errors of one cell, in order."""
        msg_id = self.request("shell", "execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": True})
        out, status, idle = [], None, False
        deadline = time.monotonic() + timeout
        while (status is None or not idle) and time.monotonic() < deadline:
            m = json.loads(self.ws.recv())
            if m.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            t, c = m["msg_type"], m["content"]
            if t == "stream":
                out.append(c["text"])
            elif t == "execute_result":
                out.append(c["data"].get("text/plain", ""))
            elif t == "error":
                out.append("%s: %s" % (c["ename"], c["evalue"]))
            elif t == "execute_reply":
                status = c["status"]
            elif t == "status" and c["execution_state"] == "idle":
                idle = True
        if status is None or not idle:
            raise AssertionError("cell did not finish in %s s: %r" % (timeout, "".join(out)))
        return status, "".join(out)

    def shutdown(self):
        try:
            self.ws.close()
        finally:
            self.rest("/api/kernels/" + self.id, "DELETE")
