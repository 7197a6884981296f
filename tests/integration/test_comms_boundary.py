"""Comms through the runner->kernel boundary, seen from a client: comm
frames the sandbox sends (here written raw on fd 3, as any code in the
sandbox can) reach iopub with their binary buffers and metadata, are tracked
for comm_info_request (filtered by target_name), are bounded like any other
output, and are closed for the frontends when the sandbox ends.  The Python
API in the sandbox (`comm`, ipywidgets) is tested in test_widgets*.py."""

import base64
import queue
import time
import uuid

import pytest

from .helpers import execute, request

pytestmark = pytest.mark.cellblock_only

RAW = r'''
import os as _os, json as _json, sys as _sys
_S = _sys.modules["_cellblock_runner"]._S
def frame(o):
    o = dict(o); o.setdefault("seq", _S.seq)
    b = _json.dumps(o).encode()
    _os.write(3, len(b).to_bytes(4, "big") + b)
    # the kernel acks comm frames: read it, as the runner's own sender does
    _os.read(3, 256)
'''


def _iopub_until_idle(kc, msg_id, timeout=30):
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            m = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        out.append(m)
        if (m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status"
                and m["content"]["execution_state"] == "idle"):
            return out
    raise AssertionError("no idle")


def test_sandbox_comm_messages_reach_iopub_with_buffers(kernel):
    kc = kernel.kc
    cid = uuid.uuid4().hex
    blob = bytes(range(256)) * 4
    code = RAW + (
        "import base64\n"
        f"frame({{'type': 'comm_open', 'comm_id': '{cid}', 'target_name': 'cb.test',"
        " 'data': {'state': 1}, 'metadata': {'version': '2.0.0'}})\n"
        f"frame({{'type': 'comm_msg', 'comm_id': '{cid}', 'data': {{'method': 'update'}},"
        f" 'buffers': [base64.b64encode({blob!r}).decode()]}})\n"
        "frame({'type': 'comm_msg', 'comm_id': 'never-opened', 'data': {}})\n")
    mid = kc.execute(code)
    msgs = _iopub_until_idle(kc, mid)
    opens = [m for m in msgs if m["msg_type"] == "comm_open"]
    assert len(opens) == 1 and opens[0]["content"]["comm_id"] == cid
    assert opens[0]["content"]["target_name"] == "cb.test"
    assert opens[0]["metadata"] == {"version": "2.0.0"}
    assert opens[0]["parent_header"]["msg_id"] == mid
    updates = [m for m in msgs if m["msg_type"] == "comm_msg"]
    assert len(updates) == 1, "a comm_msg for a comm that is not open is dropped"
    assert [bytes(b) for b in updates[0]["buffers"]] == [blob]

    r = request(kc, "comm_info_request", {})
    assert r.content["comms"] == {cid: {"target_name": "cb.test"}}
    r = request(kc, "comm_info_request", {"target_name": "cb.test"})
    assert cid in r.content["comms"]
    r = request(kc, "comm_info_request", {"target_name": "jupyter.widget"})
    assert r.content["comms"] == {}

    # the frontend closes it: the sandbox is told (the minimal runner has no
    # handler and simply finishes), and comm_info forgets it
    msg = kc.session.msg("comm_close", {"comm_id": cid, "data": {}})
    kc.shell_channel.send(msg)
    _iopub_until_idle(kc, msg["header"]["msg_id"])
    assert request(kc, "comm_info_request", {}).content["comms"] == {}


def test_comms_are_closed_when_the_sandbox_ends(kernel):
    kc = kernel.kc
    cid = uuid.uuid4().hex
    mid = kc.execute(RAW + f"frame({{'type': 'comm_open', 'comm_id': '{cid}', "
                           "'target_name': 'cb.test', 'data': {}})\n")
    _iopub_until_idle(kc, mid)
    assert cid in request(kc, "comm_info_request", {}).content["comms"]
    r = execute(kc, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", timeout=60)
    assert r.status == "error"
    closes = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not closes:
        try:
            m = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if m["msg_type"] == "comm_close":
            closes.append(m["content"]["comm_id"])
    for m in r.iopub:
        if m["msg_type"] == "comm_close":
            closes.append(m["content"]["comm_id"])
    assert cid in closes, "frontends were not told the sandbox's comm is gone"
    assert request(kc, "comm_info_request", {}).content["comms"] == {}


def test_a_comm_flood_is_bounded_like_any_output(kernel_factory, tmp_path):
    from .test_artifacts import spec_kernel
    k = spec_kernel(kernel_factory, tmp_path, "--max-output", "1")
    cid = uuid.uuid4().hex
    payload = "x" * (64 * 1024)
    r = execute(k.kc, RAW + f"frame({{'type': 'comm_open', 'comm_id': '{cid}', "
                            "'target_name': 'cb.test', 'data': {}})\n"
                            "for i in range(64):\n"
                            f"    frame({{'type': 'comm_msg', 'comm_id': '{cid}', "
                            f"'data': {{'p': '{payload}'}}}})\n", timeout=60)
    assert r.status == "ok"
    n = sum(m["msg_type"] == "comm_msg" for m in r.iopub)
    assert 0 < n < 20, "%d comm messages of 64 KiB passed a 1 MiB budget" % n
    assert "output limit" in r.stream("stderr")
