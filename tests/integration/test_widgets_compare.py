"""Issue 12 side by side: the same widget and comm sessions through cellblock
and through the stock ipykernel (the `python3` kernelspec), the iopub
message sequences compared.

What is normalised away (and why):
- ids: comm and model ids (uuids) are numbered by first appearance, the
  msg_ids of the requests sent here become <REQ n> (an Output widget's
  msg_id is one of them);
- streams are compared as the text of each stream, not by position:
  ipykernel buffers a cell's prints and publishes them when a display (or
  an explicit flush) comes, after comm messages sent earlier; cellblock
  publishes them in the order they were written (test_widgets.py checks
  that order where it matters: an Output widget's capture);
- cell file names, addresses and working directories in tracebacks
  (ipython_compare.normalise_text), tqdm's rates and times.
"""

import json
import re
import uuid

import pytest

from . import ipython_compare as ic
from .helpers import collect_iopub, get_reply

pytestmark = [pytest.mark.cellblock_only, pytest.mark.timeout(300)]

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")
_ID_LINE = re.compile(r"^ID (\w+)=(\S+)$", re.M)
# tqdm's elapsed time, remaining time and rate: "[00:00<00:00, 130.35it/s]",
# "[00:00<?, ?it/s]" before it knows
_RATE = re.compile(r"\[[^\[\]]*(?:it/s|s/it)\]")


@pytest.fixture
def pair(tmp_path):
    yield from ic.started_pair(tmp_path, "import ipywidgets; print(type(get_ipython()).__name__)",
                               missing="ipywidgets (python3-ipywidgets)")


class Session:
    """One kernel's run of a scenario: requests sent, their iopub messages
    (and shell replies), ids the cells printed (`ID name=value` lines)."""

    def __init__(self, kernel, cwd, home):
        self.k = kernel
        self.cwd, self.home = cwd, home
        self.ids = {}
        self.reqs = []
        self.steps = []

    def run(self, step):
        kc = self.k.kc
        kind = step[0]
        if kind == "cell":
            mid = kc.execute(step[1])
            self.reqs.append(mid)
            iopub = collect_iopub(kc, mid, 60)
            reply = get_reply(kc, mid, "shell", 60)["content"]
            reply = {k: v for k, v in reply.items() if k in ("status", "ename", "evalue")}
        elif kind == "comm":
            _, msg_type, content, buffers = step
            content = json.loads(json.dumps(content) % self.ids) if self.ids else content
            msg = kc.session.msg(msg_type, content)
            kc.session.send(kc.shell_channel.socket, msg, buffers=list(buffers))
            mid = msg["header"]["msg_id"]
            self.reqs.append(mid)
            iopub = collect_iopub(kc, mid, 60)
            reply = None
        elif kind == "info":
            msg = kc.session.msg("comm_info_request", step[1])
            kc.shell_channel.send(msg)
            mid = msg["header"]["msg_id"]
            self.reqs.append(mid)
            reply = get_reply(kc, mid, "shell", 30)["content"]
            collect_iopub(kc, mid, 30)
            iopub = []
        else:
            raise ValueError(kind)
        for m in iopub:
            if m["msg_type"] == "stream":
                for name, v in _ID_LINE.findall(m["content"]["text"]):
                    self.ids[name] = v
        self.steps.append((iopub, reply))

    def normalised(self):
        """[(step, {"messages": [...], "streams": {...}, "reply": ...})]"""
        numbering = {}
        labels = {mid: "<REQ %d>" % i for i, mid in enumerate(self.reqs)}

        def fix(o):
            if isinstance(o, str):
                if o in labels:
                    return labels[o]
                o = _UUID.sub(lambda m: numbering.setdefault(m.group(0),
                                                             "<ID %d>" % len(numbering)), o)
                o = _RATE.sub("[<T>]", o)
                return ic.normalise_text(o, self.cwd, self.home)
            if isinstance(o, list):
                return [fix(v) for v in o]
            if isinstance(o, dict):
                return {fix(k): fix(v) for k, v in o.items()}
            return o

        out = []
        for iopub, reply in self.steps:
            msgs, streams = [], {}
            for m in iopub:
                t, c = m["msg_type"], dict(m["content"])
                if t == "status":
                    continue
                if t == "stream":
                    streams[c["name"]] = streams.get(c["name"], "") + c["text"]
                    continue
                msgs.append(fix([t, c, m["metadata"]]) + [[bytes(b).hex() for b in m["buffers"]]])
            out.append({"messages": msgs, "streams": fix(streams), "reply": fix(reply)})
        return out


def compare(pair, steps):
    """Run `steps` on both kernels; assert the same normalised messages."""
    runs = {}
    for name, k in pair.kernels.items():
        s = Session(k, pair.cwds[name], pair.homes[name])
        for step in steps:
            s.run(step)
        runs[name] = s.normalised()
    a, b = runs["cellblock"], runs[ic.REFERENCE]
    for i, step in enumerate(steps):
        assert a[i] == b[i], "step %d %r differs from ipykernel:\n%s" % (
            i, step[:2], ic.describe(a[i], b[i]))
    return a


def test_slider_output_button_like_ipykernel(pair):
    steps = [
        ("cell", "import ipywidgets as w\n"
                 "s = w.IntSlider(value=3, min=0, max=10, description='n')\n"
                 "out = w.Output()\n"
                 "def obs(change):\n"
                 "    with out:\n"
                 "        print('value is now', change['new'])\n"
                 "s.observe(obs, 'value')\n"
                 "print('ID s=' + s.model_id)\n"
                 "print('ID out=' + out.model_id)\n"
                 "display(s, out)"),
        ("comm", "comm_msg", {"comm_id": "%(s)s", "data": {
            "method": "backbone", "sync_data": {"value": 7}}}, ()),
        ("cell", "s.value = 9\ns.max = 20\nprint(s.value)"),
        ("comm", "comm_msg", {"comm_id": "%(s)s", "data": {"method": "request_state"}}, ()),
        ("cell", "b = w.Button(description='go')\n"
                 "b.on_click(lambda btn: print('clicked'))\n"
                 "print('ID b=' + b.model_id)\n"
                 "b"),
        ("comm", "comm_msg", {"comm_id": "%(b)s", "data": {
            "method": "custom", "content": {"event": "click"}}}, ()),
        ("info", {"target_name": "jupyter.widget"}),
        ("cell", "s.close()\nb.close()"),
        ("info", {"target_name": "jupyter.widget"}),
        ("info", {}),
    ]
    res = compare(pair, steps)
    # the comparison compared something real
    assert res[1]["streams"] == {"stdout": "value is now 7\n"}
    assert res[5]["streams"] == {"stdout": "clicked\n"}
    assert len(res[6]["reply"]["comms"]) >= 6


def test_interact_and_the_version_comm_like_ipykernel(pair):
    steps = [
        # what the classic Notebook's widget extension does when it connects
        ("comm", "comm_open", {"comm_id": uuid.uuid4().hex, "target_name": "jupyter.widget.version",
                               "data": {}}, ()),
        ("cell", "from ipywidgets import interact, IntSlider\n"
                 "@interact(x=(0, 10))\n"
                 "def f(x=5):\n"
                 "    print('x is', x)\n"
                 "    return x * 2\n"
                 "print('ID x=' + f.widget.children[0].model_id)"),
        ("comm", "comm_msg", {"comm_id": "%(x)s", "data": {
            "method": "backbone", "sync_data": {"value": 8}}}, ()),
        ("comm", "comm_open", {"comm_id": "v" * 32, "target_name": "jupyter.widget.version",
                               "data": {}}, ()),
        ("comm", "comm_msg", {"comm_id": "v" * 32, "data": {"validated": True,
                                                            "frontend_version": "2.1.4"}}, ()),
        ("cell", "IntSlider(value=1)"),
    ]
    res = compare(pair, steps)
    assert res[2]["streams"] == {"stdout": "x is 8\n"}
    assert "Widget Javascript not detected" not in json.dumps(res[5])


def test_tqdm_notebook_like_ipykernel(pair):
    """tqdm.notebook on the sandbox's packages: on Debian 12, tqdm 4.64 wants
    ipywidgets >= 7 (a progress bar's `style`) and fails on ipywidgets 6 --
    the same way on both kernels.  With `style` given to the bar (what
    ipywidgets 7 has), the bar is drawn, updated and completed."""
    steps = [
        ("cell", "from tqdm.notebook import tqdm\nfor i in tqdm(range(3)):\n    pass"),
        ("cell", "import types, ipywidgets\n"
                 "if not hasattr(ipywidgets.FloatProgress, 'style'):\n"
                 "    ipywidgets.FloatProgress.style = types.SimpleNamespace(bar_color=None)\n"
                 "for i in tqdm(range(4), desc='steps', mininterval=0):\n"
                 "    pass"),
    ]
    res = compare(pair, steps)
    upd = [m for m in res[1]["messages"] if m[0] == "comm_msg"]
    assert any(m[1]["data"].get("state", {}).get("bar_style") == "success" for m in upd), upd


def test_custom_comms_like_ipykernel(pair):
    target = ("def _t(comm, msg):\n"
              "    print('open', msg['content']['data'], [bytes(b) for b in msg['buffers']])\n"
              "    comm.send({'echo': msg['content']['data']}, metadata={'m': 1},\n"
              "              buffers=[bytes(b)[::-1] for b in msg['buffers']])\n"
              "    comm.on_msg(lambda m: comm.send({'again': m['content']['data']},\n"
              "                buffers=[bytes(b) * 2 for b in m['buffers']]))\n"
              "    comm.on_close(lambda m: print('closed', m['content']['data']))\n"
              "get_ipython().kernel.comm_manager.register_target('cb.echo', _t)")
    steps = [
        ("cell", target),
        ("comm", "comm_open", {"comm_id": "e" * 32, "target_name": "cb.echo", "data": {"a": 1}},
         (b"\x00\x01\x02", b"")),
        ("comm", "comm_msg", {"comm_id": "e" * 32, "data": {"b": [1, 2]}}, (b"xyz",)),
        ("comm", "comm_msg", {"comm_id": "0" * 32, "data": {}}, ()),
        ("comm", "comm_open", {"comm_id": "n" * 32, "target_name": "nobody", "data": {}}, ()),
        ("info", {}),
        ("cell", "from ipykernel.comm import Comm\n"
                 "import numpy as np\n"
                 "c = Comm(target_name='cb.k', data={'x': [1.5, None, 's']}, metadata={'v': 2},\n"
                 "         buffers=[np.arange(3, dtype='<u2')])\n"
                 "c.send({'y': {'z': True}}, buffers=[b'ab', memoryview(b'cd')])\n"
                 "print('ID c=' + c.comm_id)"),
        ("info", {"target_name": "cb.k"}),
        ("comm", "comm_close", {"comm_id": "e" * 32, "data": {"bye": 1}}, ()),
        ("cell", "c.close(data={'done': True})"),
        ("info", {}),
    ]
    res = compare(pair, steps)
    assert res[1]["messages"][0][3] == ["020100", ""]
    assert res[2]["messages"][0][3] == ["78797a78797a"]


def test_matplotlib_nbagg_like_ipykernel(pair):
    """`%matplotlib notebook`: matplotlib's interactive figures are a comm
    (ipykernel.comm.Comm) whose frontend side asks for redraws; the PNG
    frames come back as binary buffers."""
    def frontend(kind, **kw):
        # (mpl.js sends its messages as JSON text: the comm's data is a string)
        return ("comm", "comm_msg", {"comm_id": "%(fig)s",
                                     "data": json.dumps(dict(kw, type=kind, figure_id=1))}, ())

    steps = [
        ("cell", "%matplotlib notebook\n"
                 "import matplotlib.pyplot as plt\n"
                 "fig, ax = plt.subplots(figsize=(2, 1.5), dpi=40)\n"
                 "ax.plot([1, 3, 2])\n"
                 "print('ID fig=' + list(fig.canvas.manager.web_sockets)[0].comm.comm_id)"),
        frontend("supports_binary", value=True),
        frontend("send_image_mode"),
        frontend("refresh"),
        frontend("draw"),
        frontend("resize", width=120, height=90),
        frontend("draw"),
        ("info", {"target_name": "matplotlib"}),
        frontend("closing"),
        ("info", {"target_name": "matplotlib"}),
    ]
    res = compare(pair, steps)
    opens = [m for m in res[0]["messages"] if m[0] == "comm_open"]
    assert opens and opens[0][1]["target_name"] == "matplotlib"
    pngs = [b for step in res for m in step["messages"] if m[0] == "comm_msg" for b in m[3]]
    assert pngs and all(b.startswith("89504e470d0a1a0a") for b in pngs)
    assert res[-1]["reply"]["comms"] == {}
