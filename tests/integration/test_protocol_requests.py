"""kernel_info, complete, inspect, is_complete, history and comm requests
(PROTOCOL.md 3.2-3.7; section 6 items 11, 12, 14, 16).

Expectations checked against ipykernel 6.17 (CB_TEST_KERNEL=python3).
"""

import re
import uuid

import pytest

from .helpers import execute, is_cellblock, request

ANSI = re.compile(r"\x1b\[[0-9;]*m")


# ---------------------------------------------------------------- kernel_info

@pytest.mark.parametrize("channel", ["shell", "control"])
def test_kernel_info_fields(shared_kernel, channel):
    r = request(shared_kernel.kc, "kernel_info_request", {}, channel=channel)
    c = r.content
    assert r.reply["msg_type"] == "kernel_info_reply"
    assert c["status"] == "ok"
    m = re.match(r"^(\d+)\.(\d+)(\.\d+)?$", c["protocol_version"])
    assert m and int(m.group(1)) == 5 and int(m.group(2)) >= 3, c["protocol_version"]
    assert isinstance(c["implementation"], str) and c["implementation"]
    assert isinstance(c["implementation_version"], str) and c["implementation_version"]
    if is_cellblock():
        # "ipython" once the runner says cells run through IPython's shell (as
        # ipykernel says it), "cellblock" before that or with the minimal runner
        assert c["implementation"] in ("cellblock", "ipython"), c["implementation"]
        assert c["cellblock_version"]
    li = c["language_info"]
    assert li["name"] == "python"
    assert li["mimetype"] == "text/x-python"
    assert li["file_extension"] == ".py"
    assert isinstance(li["pygments_lexer"], str) and li["pygments_lexer"].startswith(
        ("python", "ipython"))
    cm = li["codemirror_mode"]
    assert (isinstance(cm, dict) and cm.get("name") in ("python", "ipython")) or cm in (
        "python", "ipython")
    # the version is the one of the Python that runs the code
    v = execute(shared_kernel.kc, "import platform; print(platform.python_version())")
    assert li["version"] == v.stream().strip()
    assert isinstance(c["banner"], str) and c["banner"].strip()
    assert isinstance(c.get("help_links", []), list)
    for link in c.get("help_links", []):
        assert set(link) >= {"text", "url"} and link["url"].startswith("http")
    if "supported_features" in c:
        # advertise nothing that is not implemented (PROTOCOL.md 3.2)
        assert "kernel subshells" not in c["supported_features"] or not is_cellblock()
    if is_cellblock():
        # the debugger works (tests/integration/test_debugger*.py): said as the spec's 5.5 says
        assert c.get("debugger") is True and "debugger" in c["supported_features"]


def test_kernel_info_same_on_shell_and_control(shared_kernel):
    a = request(shared_kernel.kc, "kernel_info_request", {}).content
    b = request(shared_kernel.kc, "kernel_info_request", {}, channel="control").content
    assert a == b


# ---------------------------------------------------------------- complete

def _complete(kc, code, pos=None):
    return request(kc, "complete_request",
                   {"code": code, "cursor_pos": len(code) if pos is None else pos}).content


def test_complete_names_attributes_modules(shared_kernel):
    kc = shared_kernel.kc
    execute(kc, "cb_alpha_one = 1\ncb_alpha_two = 2\nimport collections")
    c = _complete(kc, "cb_alph")
    assert c["status"] == "ok"
    assert {"cb_alpha_one", "cb_alpha_two"} <= set(c["matches"])
    assert (c["cursor_start"], c["cursor_end"]) == (0, 7)
    assert isinstance(c["metadata"], dict)
    c = _complete(kc, "collections.Ord")
    assert "collections.OrderedDict" in c["matches"] or "OrderedDict" in c["matches"]
    start = c["cursor_start"]
    m = [x for x in c["matches"] if x.endswith("OrderedDict")][0]
    # applying the match to code[start:end] gives the completed text
    assert ("collections.Ord"[:start] + m).endswith("collections.OrderedDict")
    c = _complete(kc, "import collec")
    assert any(x.endswith("collections") for x in c["matches"])
    # cursor in the middle of the code
    code = "cb_alph + 1"
    c = _complete(kc, code, 7)
    assert "cb_alpha_one" in c["matches"] and c["cursor_end"] == 7


def test_complete_nothing(shared_kernel):
    c = _complete(shared_kernel.kc, "cb_zz_no_such_prefix_")
    assert c["status"] == "ok" and c["matches"] == []


def test_complete_astral_plane_offsets(shared_kernel):
    """cursor positions are Unicode code points (5.2), not UTF-16 units or
    bytes.  Emoji are not valid identifiers, so the completed names use
    Deseret letters (U+10400..), which are astral and NFKC-stable; emoji
    appear in a string before the cursor."""
    kc = shared_kernel.kc
    r = execute(kc, "\U00010400\U00010401 = 1")
    assert r.status == "ok", r.error_text()
    code = "\U00010400\U00010401 = 1\n\U00010400"
    c = _complete(kc, code)
    assert "\U00010400\U00010401" in c["matches"], c
    assert (c["cursor_start"], c["cursor_end"]) == (7, 8)  # UTF-16 would say (14, 16)

    code = "s = '\U0001F600\U0001F600'; s.upp"
    n = len(code)  # 15 code points (17 UTF-16 units, 21 bytes)
    assert execute(kc, code.replace(".upp", ".upper()")).status == "ok"  # `s` exists
    c = _complete(kc, code)
    assert c["cursor_end"] == n, c
    ups = [m for m in c["matches"] if m.endswith("upper")]
    assert ups, c
    # applying the match at [cursor_start, cursor_end) yields `s.upper`
    assert code[:c["cursor_start"]] + ups[0] == code[:-len("s.upp")] + "s.upper", c
    # and a cursor_pos inside the code, after the emoji
    c = _complete(kc, code + "\nx = 1", n)
    assert c["cursor_end"] == n and any(m.endswith("upper") for m in c["matches"])


# ---------------------------------------------------------------- inspect

def test_inspect_detail_levels(shared_kernel):
    kc = shared_kernel.kc
    execute(kc, "def cb_probe(a, b=2):\n    'Doc of probe.'\n    return a + b  # cb-src-marker\n")
    r0 = request(kc, "inspect_request", {"code": "cb_probe", "cursor_pos": 8, "detail_level": 0})
    c0 = r0.content
    assert c0["status"] == "ok" and c0["found"] is True
    t0 = ANSI.sub("", c0["data"]["text/plain"])
    assert "Doc of probe." in t0 and "(a, b=2)" in t0
    assert "cb-src-marker" not in t0
    r1 = request(kc, "inspect_request", {"code": "cb_probe", "cursor_pos": 8, "detail_level": 1})
    t1 = ANSI.sub("", r1.content["data"]["text/plain"])
    assert "cb-src-marker" in t1, "detail_level 1 must show the source"
    # cursor inside a call: the callee is inspected
    code = "cb_probe(1, "
    r = request(kc, "inspect_request", {"code": code, "cursor_pos": len(code), "detail_level": 0})
    assert r.content["found"] is True
    assert "Doc of probe." in ANSI.sub("", r.content["data"]["text/plain"])


def test_inspect_not_found(shared_kernel):
    r = request(shared_kernel.kc, "inspect_request",
                {"code": "cb_nothing_here", "cursor_pos": 5, "detail_level": 0})
    assert r.content["status"] == "ok"
    assert r.content["found"] is False
    assert r.content["data"] == {}


def test_pager_payload(shared_kernel):
    r = execute(shared_kernel.kc, "len?")
    assert r.status == "ok"
    payload = r.content["payload"]
    assert len(payload) == 1 and payload[0]["source"] == "page"
    assert "Return the number of items" in ANSI.sub("", payload[0]["data"]["text/plain"])
    assert isinstance(payload[0].get("start", 0), int)
    assert r.outputs() == []


# ---------------------------------------------------------------- is_complete

@pytest.mark.parametrize("code,status,indent", [
    ("x = 1", "complete", None),
    ("for i in x:", "incomplete", "    "),
    ("if x:\n    for y in z:", "incomplete", "        "),
    ("x = (1,", "incomplete", ""),
    ("print('''abc", "incomplete", ""),
    ("x = )", "invalid", None),
    ("import = 7q", "invalid", None),
])
def test_is_complete(shared_kernel, code, status, indent):
    c = request(shared_kernel.kc, "is_complete_request", {"code": code}).content
    assert c["status"] == status, c
    if status == "incomplete" and indent:
        assert c["indent"] == indent
    elif status == "incomplete":
        assert isinstance(c.get("indent", ""), str)


# ---------------------------------------------------------------- history

def test_history_shapes(kernel):
    kc = kernel.kc
    tok = "cbh" + uuid.uuid4().hex[:10]
    codes = [f"{tok}_a = 1", f"{tok}_a + 1", f"print({tok}_a)"]
    for code in codes:
        assert execute(kc, code).status == "ok"

    tail = request(kc, "history_request", {"output": False, "raw": True,
                                           "hist_access_type": "tail", "n": 3}).content
    assert tail["status"] == "ok"
    h = tail["history"]
    assert [e[2] for e in h] == codes
    assert all(len(e) == 3 and isinstance(e[0], int) and isinstance(e[1], int) for e in h)
    assert [e[1] for e in h] == [1, 2, 3]  # line numbers = execution counts of this session
    session = h[0][0]

    out = request(kc, "history_request", {"output": True, "raw": True,
                                          "hist_access_type": "tail", "n": 3}).content["history"]
    assert [e[2][0] for e in out] == codes
    assert all(len(e[2]) == 2 for e in out)
    # ipykernel keeps outputs only with db_log_output (None otherwise)
    assert out[1][2][1] in (None, "2")  # the output of `a + 1`

    rng = request(kc, "history_request", {"output": False, "raw": True, "hist_access_type": "range",
                                          "session": 0, "start": 1, "stop": 3}).content["history"]
    # session 0 = the current session (IPython); ipykernel answers with 0
    assert [(e[1], e[2]) for e in rng] == [(1, codes[0]), (2, codes[1])]
    assert all(e[0] in (0, session) for e in rng)

    srch = request(kc, "history_request", {"output": False, "raw": True,
                                           "hist_access_type": "search",
                                           "pattern": f"{tok}_a*", "n": 10}).content["history"]
    assert [e[2] for e in srch] == codes[:2]
    srch = request(kc, "history_request", {"output": False, "raw": True,
                                           "hist_access_type": "search",
                                           "pattern": f"*{tok}?a)", "n": 10}).content["history"]
    assert [e[2] for e in srch] == codes[2:]
    assert execute(kc, codes[0]).status == "ok"
    uniq = request(kc, "history_request", {"output": False, "raw": True,
                                           "hist_access_type": "search", "unique": True,
                                           "pattern": f"{tok}_a =*", "n": 10}).content["history"]
    assert [e[2] for e in uniq] == [codes[0]]


def test_history_store_history_false_not_recorded(kernel):
    kc = kernel.kc
    tok = "cbh" + uuid.uuid4().hex[:10]
    execute(kc, f"{tok} = 1")
    execute(kc, f"{tok} + 100", store_history=False)
    execute(kc, f"{tok} + 200", silent=True)
    h = request(kc, "history_request", {"output": False, "raw": True,
                                        "hist_access_type": "tail", "n": 1}).content["history"]
    assert h[-1][2] == f"{tok} = 1"


# ---------------------------------------------------------------- comms

def test_comm_info_empty(shared_kernel):
    r = request(shared_kernel.kc, "comm_info_request", {})
    assert r.content == {"status": "ok", "comms": {}}
    r = request(shared_kernel.kc, "comm_info_request", {"target_name": "jupyter.widget"})
    assert r.content == {"status": "ok", "comms": {}}


def test_comm_open_unknown_target_answered_with_close(shared_kernel):
    comm_id = uuid.uuid4().hex
    r = request(shared_kernel.kc, "comm_open",
                {"comm_id": comm_id, "target_name": "cb.no.such.target", "data": {}},
                expect_reply=False)
    assert r.types()[0] == "status" and r.types()[-1] == "status"
    closes = r.of_type("comm_close")
    assert len(closes) == 1 and closes[0]["content"]["comm_id"] == comm_id
    # no reply on shell: the next shell message is the next request's reply
    k = request(shared_kernel.kc, "kernel_info_request", {})
    assert k.reply["msg_type"] == "kernel_info_reply"
    # the comm is not kept open
    assert request(shared_kernel.kc, "comm_info_request", {}).content["comms"] == {}
