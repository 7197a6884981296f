"""Wire-level robustness (PROTOCOL.md 1.3, 1.4, section 6 items 1-2): bad,
missing and replayed signatures, malformed frames, buffers, identities,
unknown message types.  Every broken message must be dropped without a reply
and without being executed, and the kernel must go on serving.

Sent through a raw pyzmq client (helpers.RawClient) so that the frames can be
anything.  Expectations checked against ipykernel 6.17 (CB_TEST_KERNEL=python3).
"""

import hmac
import json
import uuid

import pytest
from jupyter_client.session import Session

from .helpers import DELIM, RawClient, execute, for_parent, is_cellblock, kernel_alive_check


@pytest.fixture
def raw(shared_kernel):
    with shared_kernel.raw() as r:
        r.wait_ready()
        yield r


def _marker():
    return "cb_mark_" + uuid.uuid4().hex[:12]


def _defined(kernel, name):
    r = execute(kernel.kc, f"print({name!r} in globals())")
    assert r.status == "ok", r.content
    return r.stream().strip()


def _assert_still_serving(raw, dropped_msg_id=None, iopub_allowed=False):
    """After a dropped message: a kernel_info on shell and on control are
    answered, and nothing (no reply, and unless allowed, no iopub message)
    refers to the dropped message.  iopub_allowed: the message was a
    well-formed, correctly signed message with invalid content; the kernel
    may then treat it as a request (busy/idle) and may answer it with an
    error reply, but never run it."""
    events = []
    for channel in ("shell", "control"):
        m, ev = raw.request(channel, "kernel_info_request", timeout=15)
        events += ev
        replies = [e for e in ev if e.channel == channel and e.msg_type == "kernel_info_reply"
                   and e.parent_id == m["header"]["msg_id"]]
        assert len(replies) == 1, f"no kernel_info_reply on {channel} after a bad message: {ev}"
    if dropped_msg_id is not None:
        bad = [e for e in events if e.parent_id == dropped_msg_id]
        if iopub_allowed:
            bad = [e for e in bad if e.channel != "iopub"
                   and e.content.get("status") != "error"]
        assert bad == [], f"kernel answered a message it should have dropped: {bad}"
    # nothing but the kernel_info traffic came back
    ids = set(e.parent_id for e in events)
    stray = [e for e in events if e.parent_id not in ids or e.channel in ("stdin",)]
    assert stray == []


def _signed_execute(raw, code, signature=None, key=None, tamper=None):
    """Frames for an execute_request whose signature can be broken."""
    header, h = raw.header_bytes("execute_request")
    content = json.dumps({"code": code, "silent": False, "store_history": True,
                          "user_expressions": {}, "allow_stdin": False,
                          "stop_on_error": True}).encode()
    parts = [header, b"{}", b"{}", content]
    if key is not None:
        mac = hmac.new(key, digestmod="sha256")
        for p in parts:
            mac.update(p)
        signature = mac.hexdigest().encode()
    elif signature is None:
        signature = raw.sign(parts)
    if tamper is not None:
        parts[3] = tamper(parts[3])
    return [DELIM, signature] + parts, h["msg_id"]


BAD_SIGNATURES = {
    "zeroed": dict(signature=b"0" * 64),
    "missing": dict(signature=b""),
    "wrong_key": dict(key=b"not-the-kernel-key"),
    "truncated": dict(signature=None, truncate=True),
    "tampered_content": dict(tamper=lambda c: c.replace(b'"silent": false', b'"silent": true')),
    "not_hex": dict(signature=b"z" * 64),
    # the reference Session compares hexdigest() strings: case matters
    "uppercase": dict(signature=None, upper=True),
}


@pytest.mark.parametrize("kind", sorted(BAD_SIGNATURES))
def test_bad_signature_dropped(shared_kernel, raw, kind):
    spec = dict(BAD_SIGNATURES[kind])
    truncate = spec.pop("truncate", False)
    upper = spec.pop("upper", False)
    name = _marker()
    frames, msg_id = _signed_execute(raw, f"{name} = 1", **spec)
    if truncate:
        frames[1] = frames[1][:32]
    if upper:
        if not raw.info["key"]:
            pytest.skip("kernel runs without a key")
        assert frames[1].upper() != frames[1]
        frames[1] = frames[1].upper()
    if kind == "missing" and not raw.info["key"]:
        pytest.skip("kernel runs without a key")
    raw.send_frames("shell", frames)
    _assert_still_serving(raw, msg_id)
    assert _defined(shared_kernel, name) == "False", "a badly signed message was executed"


@pytest.mark.parametrize("via", ["same_socket", "other_client"])
def test_replayed_message_dropped(shared_kernel, raw, via):
    name = _marker()
    code = f"{name} = globals().get({name!r}, 0) + 1"
    frames, msg_id = _signed_execute(raw, code)
    raw.send_frames("shell", frames)
    ev = raw.collect(msg_id)
    reply = [e for e in ev if e.channel == "shell" and e.parent_id == msg_id]
    assert reply and reply[0].content["status"] == "ok"
    # byte-identical replay
    if via == "same_socket":
        raw.send_frames("shell", frames)
        _assert_still_serving(raw, msg_id)
    else:
        with shared_kernel.raw() as other:
            other.wait_ready()
            other.send_frames("shell", frames)
            _assert_still_serving(other, msg_id)
    r = execute(shared_kernel.kc, f"print({name})")
    assert r.stream().strip() == "1", "the replayed execute_request ran again"


def _malformed(raw):
    """name -> (frames, msg_id of the embedded header or None, iopub allowed)."""
    cases = {}
    hdr, h = raw.header_bytes("kernel_info_request")
    good = [hdr, b"{}", b"{}", b"{}"]
    sig = raw.sign(good)
    cases["no_delimiter"] = ([sig] + good, h["msg_id"], False)
    cases["only_delimiter"] = ([DELIM], None, False)
    cases["delimiter_and_signature"] = ([DELIM, sig], None, False)
    cases["three_frames_after_delimiter"] = ([DELIM, raw.sign(good[:2]), hdr, b"{}"], None, False)
    cases["four_frames_after_delimiter"] = ([DELIM, raw.sign(good[:3]), hdr, b"{}", b"{}"],
                                            h["msg_id"], False)
    cases["empty_frames"] = ([DELIM, b"", b"", b"", b"", b""], None, False)

    def signed(header=hdr, parent=b"{}", metadata=b"{}", content=b"{}"):
        return raw.custom_frames(header=header, parent=parent, metadata=metadata, content=content)

    cases["invalid_json_header"] = (signed(header=b'{"msg_id": "x", '), None, False)
    cases["invalid_json_content"] = (signed(content=b'{"code": '), h["msg_id"], False)
    cases["invalid_json_parent"] = (signed(parent=b"{{"), h["msg_id"], False)
    cases["invalid_utf8_header"] = (signed(header=hdr[:-1] + b'\xff\xfe}'), None, False)
    cases["header_is_array"] = (signed(header=b"[1, 2, 3]"), None, False)
    cases["header_is_string"] = (signed(header=b'"kernel_info_request"'), None, False)
    cases["header_is_null"] = (signed(header=b"null"), None, False)
    cases["header_without_msg_type"] = (
        signed(header=json.dumps({k: v for k, v in h.items() if k != "msg_type"}).encode()),
        h["msg_id"], False)
    cases["header_msg_type_not_string"] = (
        signed(header=json.dumps(dict(h, msg_type=42)).encode()), h["msg_id"], True)
    # A well-formed header with a content that is not an object: ipykernel
    # publishes busy/idle for it (its handler then fails); cellblock drops it
    # earlier.  Either way: no reply and no execution.
    eh, e = raw.header_bytes("execute_request")
    cases["content_is_number"] = (signed(header=eh, content=b"42"), e["msg_id"], True)
    cases["content_is_array"] = (signed(header=eh, content=b'["print(1)"]'), e["msg_id"], True)
    cases["code_not_string"] = (signed(header=eh, content=b'{"code": 17}'), e["msg_id"], True)
    return cases


MALFORMED = ["no_delimiter", "only_delimiter", "delimiter_and_signature",
             "three_frames_after_delimiter", "four_frames_after_delimiter", "empty_frames",
             "invalid_json_header", "invalid_json_content", "invalid_json_parent",
             "invalid_utf8_header", "header_is_array", "header_is_string", "header_is_null",
             "header_without_msg_type", "header_msg_type_not_string",
             "content_is_number", "content_is_array", "code_not_string"]


@pytest.mark.parametrize("kind", MALFORMED)
@pytest.mark.parametrize("channel", ["shell", "control"])
def test_malformed_message_dropped(shared_kernel, raw, kind, channel):
    if kind == "no_delimiter" and channel == "control" and not is_cellblock():
        # ipykernel 6.17 calls feed_identities outside its try block in
        # process_control: the exception kills its control handling for good.
        # cellblock must not copy that.
        pytest.xfail("ipykernel loses its control channel on a frame without <IDS|MSG>")
    frames, msg_id, iopub_allowed = _malformed(raw)[kind]
    raw.send_frames(channel, frames)
    _assert_still_serving(raw, msg_id, iopub_allowed=iopub_allowed)
    kernel_alive_check(shared_kernel.kc)


def test_huge_message_does_not_kill_kernel(shared_kernel):
    """A frame over any sane limit (80 MiB) is refused or handled, never a
    crash; other clients are served throughout.  (cellblock caps frames at
    64 MiB via ZMQ_MAXMSGSIZE and disconnects the sender.)"""
    with shared_kernel.raw() as r:
        r.wait_ready()
        r.send("shell", "kernel_info_request", buffers=[b"\0" * (80 << 20)])
        hdr, _ = r.header_bytes("execute_request")
        r.send_frames("shell", r.custom_frames(header=hdr, content=b'{"code": "' + b"1" * (80 << 20) + b'"}'))
    kernel_alive_check(shared_kernel.kc)
    with shared_kernel.raw() as r2:
        r2.wait_ready()
        _assert_still_serving(r2)


def test_large_but_reasonable_message_executes(shared_kernel, raw):
    """4 MiB of code is a legal request and must run."""
    code = "cb_big = len('" + "x" * (4 << 20) + "')\nprint(cb_big)"
    m, ev = raw.request("shell", "execute_request",
                        {"code": code, "silent": False, "store_history": False,
                         "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                        timeout=60)
    mid = m["header"]["msg_id"]
    reply = [e for e in ev if e.channel == "shell" and e.parent_id == mid]
    assert reply and reply[0].content["status"] == "ok", reply
    out = "".join(e.content["text"] for e in for_parent(ev, mid, "iopub") if e.msg_type == "stream")
    assert out.strip() == str(4 << 20)


def test_buffers_accepted(shared_kernel, raw):
    """Binary buffers after the content frame are accepted (and not signed)."""
    name = _marker()
    m, ev = raw.request("shell", "execute_request",
                        {"code": f"{name} = 5", "silent": False, "store_history": True,
                         "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                        buffers=[b"\x00\xff\x00binary", b"", b"\x89PNG\r\n" * 1000])
    mid = m["header"]["msg_id"]
    reply = [e for e in ev if e.channel == "shell" and e.parent_id == mid]
    assert reply and reply[0].content["status"] == "ok"
    assert _defined(shared_kernel, name) == "True"
    # a comm_msg with buffers (no such comm): no reply, busy/idle, kernel fine
    m, ev = raw.request("shell", "comm_msg", {"comm_id": uuid.uuid4().hex, "data": {}},
                        expect_reply=False, buffers=[b"\x01\x02\x03"])
    states = [e.content["execution_state"] for e in for_parent(ev, m["header"]["msg_id"], "iopub")
              if e.msg_type == "status"]
    assert states == ["busy", "idle"]
    _assert_still_serving(raw)


@pytest.mark.parametrize("n", [1, 3, 8, 50])
def test_identities_echoed(raw, n):
    """Routing identities before the delimiter come back verbatim, in order."""
    idents = [f"id-{i}".encode() for i in range(n - 1)] + [b"\x00\xffbinary-id"]
    m, ev = raw.request("shell", "kernel_info_request", idents=idents)
    reply = [e for e in ev if e.channel == "shell" and e.parent_id == m["header"]["msg_id"]]
    assert len(reply) == 1
    assert reply[0].idents == idents


def test_too_many_identities_kernel_survives(shared_kernel, raw):
    """2000 identity frames (more than any real route of ROUTER proxies):
    the kernel may drop the message, but if it replies the identities must
    be intact; it keeps serving."""
    idents = [b"i%d" % i for i in range(2000)]
    m, ev = raw.request("shell", "kernel_info_request", idents=idents, timeout=5)
    reply = [e for e in ev if e.channel == "shell" and e.parent_id == m["header"]["msg_id"]]
    if reply:
        assert reply[0].idents == idents
    _assert_still_serving(raw)


@pytest.mark.parametrize("channel", ["shell", "control"])
def test_unknown_msg_type_busy_idle_no_reply(raw, channel):
    m, ev = raw.request(channel, "cellblock_no_such_request", {"x": 1}, expect_reply=False,
                        after_idle=1.0)
    mid = m["header"]["msg_id"]
    mine = for_parent(ev, mid)
    assert [(e.channel, e.msg_type, e.content.get("execution_state")) for e in mine] == [
        ("iopub", "status", "busy"), ("iopub", "status", "idle")]
    assert mine[0].parent_json == json.loads(raw.session.pack(m["header"]))
    _assert_still_serving(raw)


def test_unsigned_messages_accepted_without_key(kernel_factory):
    """Empty key = signing disabled: the kernel signs nothing (b'') and
    accepts unsigned messages."""
    k = kernel_factory(session=Session(key=b""))
    assert k.connection_info()["key"] in (b"", "")
    r = execute(k.kc, "print('no key')")
    assert r.status == "ok" and r.stream() == "no key\n"
    with RawClient(k.connection_info()) as raw:
        raw.wait_ready()
        m, ev = raw.request("shell", "kernel_info_request")
        assert ev, "no messages"
        for e in ev:
            assert e.signature == b"", f"kernel signed {e} although the key is empty"
        # and a frame with junk in the signature slot is accepted too?  The
        # spec only says "do not verify": ipykernel ignores it, so must we.
        hdr, h = raw.header_bytes("kernel_info_request")
        raw.send_frames("shell", raw.custom_frames(header=hdr, signature=b""))
        ev = raw.collect(h["msg_id"])
        assert [e.msg_type for e in ev if e.channel == "shell"] == ["kernel_info_reply"]


def test_kernel_signatures_unique_and_valid(raw):
    """Every message from the kernel verifies with the key (Received checks
    it, like jupyter_client) and none repeats a signature."""
    sigs = []
    for channel in ("shell", "control"):
        for _ in range(3):
            _, ev = raw.request(channel, "kernel_info_request")
            sigs += [e.signature for e in ev]
    if raw.info["key"]:
        assert all(len(s) == 64 and s == s.lower() for s in sigs)
    assert len(sigs) == len(set(sigs)) >= 18
