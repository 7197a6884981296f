"""Every plain-http request on a proxy connection is parsed, checked and
rewritten (issue 18, finding 3): the second request of a kept-alive
connection, pipelined requests, and bytes hidden in a body by the usual
smuggling shapes never reach an upstream raw.

The upstream here (proxy_kit.RecordingUpstream, on 127.0.0.1) keeps every
connection alive whatever it is asked and records every byte it receives,
so a request the proxy let through unchecked shows up in its record even
though it was sent after `Connection: close`.  The proxy program runs
alone, as in test_network_allow.py's bound tests.
"""

import os
import socket
import threading
import time

import pytest

from .proxy_kit import Proxy, RecordingUpstream, read_response, recv_all
from .helpers import is_cellblock

pytestmark = pytest.mark.cellblock_only


@pytest.fixture
def up():
    if not is_cellblock():
        pytest.skip("cellblock only")
    u = RecordingUpstream()
    yield u
    u.close()


@pytest.fixture
def px(up):
    p = Proxy("--allow", f"a.test:{up.port},b.test:{up.port}",
              "--resolve", "a.test=127.0.0.1", "--resolve", "b.test=127.0.0.1",
              "--head-timeout-ms", "3000")
    yield p
    assert p.stop(), "the proxy died"


def _conn(px):
    s = socket.create_connection(("127.0.0.1", px.port), timeout=10)
    return s, s.makefile("rb")


def _lines(up):
    return [r[1] for r in up.requests]


def test_a_kept_alive_second_request_is_checked_and_rewritten(px, up):
    s, f = _conn(px)
    s.sendall(f"GET http://a.test:{up.port}/one HTTP/1.1\r\nHost: evil.example\r\n"
              "Proxy-Authorization: Basic c2VjcmV0\r\n\r\n".encode())
    st, _, body = read_response(f)
    assert st == "HTTP/1.1 200 OK" and body.endswith(f"/one Host a.test:{up.port}".encode()), body
    # the same connection, another allowed host, the headers a proxy must not pass on
    s.sendall(f"GET http://b.test:{up.port}/two HTTP/1.1\r\nHost: evil.example\r\n"
              "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\r\n".encode())
    st, _, body = read_response(f)
    assert st == "HTTP/1.1 200 OK", st
    assert body.endswith(f"/two Host b.test:{up.port}".encode()), body
    # and a third, in origin form with a Host naming an unlisted name: refused
    s.sendall(b"GET /three HTTP/1.1\r\nHost: c.test\r\n\r\n")
    st, _, body = read_response(f)
    assert st.startswith("HTTP/1.1 403 Forbidden (cellblock proxy: c.test:80 is not in the "
                         "allowlist"), st
    s.close()
    assert _lines(up) == ["GET /one HTTP/1.1", "GET /two HTTP/1.1"], up.requests
    raw = up.received()
    assert b"evil.example" not in raw and b"Proxy-" not in raw and b"c.test" not in raw, raw
    assert raw.count(b"Connection: close\r\n") == 2, raw


def _dribble(s, data):
    """One byte per send, each its own read for the proxy."""
    for i in range(len(data)):
        s.sendall(data[i:i + 1])
        time.sleep(0.002)


def test_heads_sent_a_byte_at_a_time_are_served_like_whole_ones(px, up):
    """The proxy parses a head again only when a line has ended since it last
    looked (both parsers decide only at line ends): a head that arrives a
    byte at a time, the next head on the same connection, and a malformed
    one get exactly the answers they get whole."""
    s, f = _conn(px)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for path, host in (("one", "a"), ("two", "b")):
        _dribble(s, f"GET http://{host}.test:{up.port}/{path} HTTP/1.1\r\nX-A: 1\r\n\r\n"
                 .encode())
        st, _, body = read_response(f)
        assert st == "HTTP/1.1 200 OK", st
        assert body.endswith(f"/{path} Host {host}.test:{up.port}".encode()), body
    # a long head a byte at a time, then a short one with its body in one
    # send, its line feeds all before where the long one ended: what the
    # proxy saw of a head starts again with each head
    _dribble(s, f"GET http://a.test:{up.port}/long HTTP/1.1\r\nX-Pad: {'p' * 300}\r\n\r\n"
             .encode())
    st, _, _ = read_response(f)
    assert st == "HTTP/1.1 200 OK", st
    s.sendall(f"POST http://b.test:{up.port}/short HTTP/1.1\r\nContent-Length: 400\r\n\r\n"
              .encode() + b"y" * 400)
    st, _, body = read_response(f)
    assert st == "HTTP/1.1 200 OK" and b"/short" in body, (st, body)
    _dribble(s, f"GET http://a.test:{up.port}/three HTTP/1.1\nX-B: 2\r\n".encode())
    st, _, _ = read_response(f)
    assert st.startswith("HTTP/1.1 400 Bad Request (cellblock proxy: a line not ended by CRLF"), st
    s.close()
    assert _lines(up) == ["GET /one HTTP/1.1", "GET /two HTTP/1.1", "GET /long HTTP/1.1",
                          "POST /short HTTP/1.1"], up.requests


class _ScriptedUpstream:
    """An HTTP server on 127.0.0.1 that answers each request with the pieces
    scripted for its path: bytes sent whole, ("dribble", bytes) sent a byte
    per send (each its own read for the proxy), or a pause in seconds.  The
    proxy connects anew for each request; this server keeps every connection
    open after its answer (no response here ends at the upstream's EOF) and
    records the request lines in order."""

    def __init__(self, script):
        self.script = script
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.lines = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.sock.close()

    def _accept(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        s.settimeout(10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                b = s.recv(4096)
                if not b:
                    return
                head += b
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            with self.lock:
                self.lines.append(line)
            for piece in self.script[line.split(" ")[1]]:
                if isinstance(piece, float):
                    time.sleep(piece)
                elif isinstance(piece, tuple):
                    _dribble(s, piece[1])
                else:
                    s.sendall(piece)
            s.settimeout(60)       # longer than the client waits: never an end by EOF
            while s.recv(4096):    # until the proxy closes its end
                pass
        except OSError:
            pass    # the proxy closed early (the malformed head)
        finally:
            s.close()


# each response as the upstream sends it, and so as the client must get it
_DRIBBLED = {
    "/one": [("dribble", b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-A: 1\r\n\r\n"), 0.1,
             b"one"],
    # an interim head, then the final one, all a byte at a time
    "/two": [("dribble", b"HTTP/1.1 100 Continue\r\n\r\n"
                         b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-B: 2\r\n\r\n"), 0.1, b"two"],
    # a long head a byte at a time (whole before its body comes), then a short
    # one sent whole with a body without line feeds: all of the short head's
    # line feeds are before where the long head ended
    "/long": [("dribble", b"HTTP/1.1 200 OK\r\nX-Pad: " + b"p" * 300 +
                          b"\r\nContent-Length: 4\r\n\r\n"), 0.2, b"long"],
    "/short": [b"HTTP/1.1 200 OK\r\nContent-Length: 400\r\n\r\n" + b"s" * 400],
    # no body, nothing after it: the line feed that ends the head is the
    # last byte the proxy gets
    "/empty": [("dribble", b"HTTP/1.1 204 No Content\r\nX-E: 1\r\n\r\n")],
    "/bad": [("dribble", b"HTTP/1.1 200 OK\r\nX-Ok: 1\r\nNo colon here\r\n\r\nbad")],
}


@pytest.fixture
def dribbler():
    if not is_cellblock():
        pytest.skip("cellblock only")
    u = _ScriptedUpstream(_DRIBBLED)
    yield u
    u.close()


@pytest.fixture
def pxd(dribbler):
    p = Proxy("--allow", f"a.test:{dribbler.port}", "--resolve", "a.test=127.0.0.1",
              "--head-timeout-ms", "3000")
    yield p
    assert p.stop(), "the proxy died"


def test_response_heads_sent_a_byte_at_a_time_are_relayed_like_whole_ones(pxd, dribbler):
    """The response side of the test above: the proxy parses an upstream's
    head again only when a line has ended since it last looked (relay.c,
    c->resp_seen).  Heads that arrive a byte at a time, an interim one before
    the final one, the next response on the same client connection (a short
    head whose line feeds are all before where the long one before it ended),
    a head whose last line feed is the last byte sent, and a malformed head
    get exactly what they get whole: the client receives each response byte
    for byte, and the malformed one the 502 the proxy answers a malformed
    upstream head with, which ends the connection."""
    s, f = _conn(pxd)
    for path in ("one", "two", "long", "short", "empty"):
        s.sendall(f"GET http://a.test:{dribbler.port}/{path} HTTP/1.1\r\n\r\n".encode())
        want = b"".join(p if isinstance(p, bytes) else p[1] for p in _DRIBBLED["/" + path]
                        if not isinstance(p, float))
        assert f.read(len(want)) == want, path
    s.sendall(f"GET http://a.test:{dribbler.port}/bad HTTP/1.1\r\n\r\n".encode())
    st, _, _ = read_response(f)
    assert st == (f"HTTP/1.1 502 Bad Gateway (cellblock proxy: a.test:{dribbler.port}: "
                  "the upstream sent a malformed header line)"), st
    assert read_response(f) is None        # an error reply ends the connection
    s.close()
    assert dribbler.lines == [f"GET /{p} HTTP/1.1"
                              for p in ("one", "two", "long", "short", "empty", "bad")]


def test_pipelined_requests_are_each_checked(px, up):
    s, f = _conn(px)
    s.sendall(f"GET http://a.test:{up.port}/one HTTP/1.1\r\n\r\n"
              f"GET http://unlisted.test:{up.port}/two HTTP/1.1\r\n\r\n"
              f"GET http://a.test:{up.port}/three HTTP/1.1\r\n\r\n".encode())
    st, _, body = read_response(f)
    assert st == "HTTP/1.1 200 OK" and b"/one" in body, (st, body)
    st, _, body = read_response(f)
    assert st.startswith(f"HTTP/1.1 403 Forbidden (cellblock proxy: unlisted.test:{up.port} is not "
                         "in the allowlist"), st
    assert read_response(f) is None       # an error reply ends the connection
    s.close()
    assert _lines(up) == ["GET /one HTTP/1.1"], up.requests
    assert b"unlisted" not in up.received() and b"/three" not in up.received()


def test_pipelined_requests_to_allowed_hosts_are_answered_in_order(px, up):
    s, f = _conn(px)
    s.sendall("".join(f"GET http://{h}.test:{up.port}/{i} HTTP/1.1\r\n\r\n"
                      for i, h in enumerate("abab")).encode())
    for i, h in enumerate("abab"):
        st, _, body = read_response(f)
        assert st == "HTTP/1.1 200 OK" and body.endswith(f"/{i} Host {h}.test:{up.port}".encode())
    s.close()
    assert _lines(up) == [f"GET /{i} HTTP/1.1" for i in range(4)]
    # one upstream connection per request, each told to close
    assert sorted({r[0] for r in up.requests}) == sorted(r[0] for r in up.requests)


def test_a_request_hidden_in_a_body_stays_body(px, up):
    hidden = f"GET http://unlisted.test:{up.port}/x HTTP/1.1\r\n\r\n".encode()
    s, f = _conn(px)
    s.sendall(f"POST http://a.test:{up.port}/cl HTTP/1.1\r\nContent-Length: {len(hidden)}\r\n\r\n"
              .encode() + hidden +
              f"POST http://b.test:{up.port}/te HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
              .encode() + b"%x\r\n" % len(hidden) + hidden + b"\r\n0\r\nX-T: 1\r\n\r\n" +
              f"GET http://a.test:{up.port}/after HTTP/1.1\r\n\r\n".encode())
    for want in (b"/cl", b"/te", b"/after"):
        st, _, body = read_response(f)
        assert st == "HTTP/1.1 200 OK" and want in body, (st, body)
    s.close()
    assert [(r[1], r[3]) for r in up.requests] == [
        ("POST /cl HTTP/1.1", hidden), ("POST /te HTTP/1.1", hidden), ("GET /after HTTP/1.1", b"")]


@pytest.mark.parametrize("framing", [
    b"Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",     # 0x prefix
    b"Transfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n",      # leading space
    b"Transfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n",      # trailing space
    b"Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",         # bare LF
    b"Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",         # data longer than its size
    b"Transfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",      # negative
    b"Transfer-Encoding: chunked\r\n\r\n1000000000000000005\r\nhello\r\n0\r\n\r\n",  # overflow
])
def test_a_malformed_chunked_body_ends_the_connection(px, up, framing):
    smuggled = f"GET http://unlisted.test:{up.port}/smuggled HTTP/1.1\r\n\r\n".encode()
    s, f = _conn(px)
    s.sendall(f"POST http://a.test:{up.port}/bad HTTP/1.1\r\n".encode() + framing + smuggled)
    recv_all(s)
    s.close()
    assert b"smuggled" not in up.received(), up.received()
    assert all(b"/bad" not in r[3] for r in up.requests)


@pytest.mark.parametrize("headers,status", [
    (b"Transfer-Encoding: gzip, chunked\r\n", 501),
    (b"Transfer-Encoding: chunked, gzip\r\n", 501),
    (b"Transfer-Encoding: xchunked\r\n", 501),
    (b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400),
    (b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400),
    (b"Content-Length: 5\r\nContent-Length: 5\r\n", 400),
    (b"Content-Length: +5\r\n", 400),
    (b"Content-Length: 5, 5\r\n", 400),
    (b"Content-Length: 99999999999999999999\r\n", 400),
])
def test_ambiguous_body_framing_is_refused(px, up, headers, status):
    s, f = _conn(px)
    s.sendall(f"POST http://a.test:{up.port}/x HTTP/1.1\r\n".encode() + headers + b"\r\nhello")
    st, _, _ = read_response(f)
    assert st.startswith(f"HTTP/1.1 {status} "), st
    s.close()
    assert up.received() == b""


def test_transfer_encoding_in_http_1_0_is_refused(px, up):
    s, f = _conn(px)
    s.sendall(f"POST http://a.test:{up.port}/x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
              "0\r\n\r\n".encode())
    assert read_response(f)[0].startswith("HTTP/1.1 400 "), "HTTP/1.0 with Transfer-Encoding"
    s.close()
    assert up.received() == b""


def test_responses_are_framed_too(px, up):
    """The client gets each response exactly: a chunked one with its trailer,
    one announced shorter than sent (the rest is dropped, never read as the
    next response), a HEAD answer without a body, an interim 100."""
    s, f = _conn(px)
    s.sendall(f"GET http://a.test:{up.port}/chunked HTTP/1.1\r\n\r\n"
              f"GET http://a.test:{up.port}/overlong HTTP/1.1\r\n\r\n"
              f"HEAD http://b.test:{up.port}/head HTTP/1.1\r\n\r\n"
              f"PUT http://a.test:{up.port}/put HTTP/1.1\r\nExpect: 100-continue\r\n"
              "Content-Length: 2\r\n\r\nhi"
              f"GET http://a.test:{up.port}/last HTTP/1.1\r\n\r\n".encode())
    assert read_response(f)[2] == b"chunked"
    assert read_response(f)[2] == b"five!"
    st, headers, _ = read_response(f, head_only=True)
    assert st == "HTTP/1.1 200 OK" and int(headers["content-length"]) > 0
    assert b"/put" in read_response(f)[2]
    st, _, body = read_response(f)
    assert st == "HTTP/1.1 200 OK" and b"/last" in body, body
    s.close()
    assert [r[1] for r in up.requests] == ["GET /chunked HTTP/1.1", "GET /overlong HTTP/1.1",
                                           "HEAD /head HTTP/1.1", "PUT /put HTTP/1.1",
                                           "GET /last HTTP/1.1"]


def test_a_response_delimited_by_close_ends_the_connection(px, up):
    s, f = _conn(px)
    s.sendall(f"GET http://a.test:{up.port}/close HTTP/1.1\r\n\r\n"
              f"GET http://a.test:{up.port}/never HTTP/1.1\r\n\r\n".encode())
    assert read_response(f)[2] == b"all of it, then the end"
    assert read_response(f) is None
    s.close()
    assert _lines(up) == ["GET /close HTTP/1.1"]


def test_connection_close_from_the_client_is_honoured(px, up):
    for first in (f"GET http://a.test:{up.port}/1 HTTP/1.1\r\nConnection: close\r\n\r\n",
                  f"GET http://a.test:{up.port}/1 HTTP/1.0\r\n\r\n"):
        s, f = _conn(px)
        s.sendall((first + f"GET http://a.test:{up.port}/2 HTTP/1.1\r\n\r\n").encode())
        assert b"/1" in read_response(f)[2]
        assert read_response(f) is None
        s.close()
    assert _lines(up) == ["GET /1 HTTP/1.1", "GET /1 HTTP/1.0"]


# --------------------------------------------------------------------------
# --secret: a placeholder in a request body to a host it is not bound to
# --------------------------------------------------------------------------

PH = "cb-secret-" + "5e" * 16
VALUE = "sk-body-test-value"
REFUSED = ("HTTP/1.1 403 Forbidden (cellblock proxy: the request's body carries the placeholder "
           "of the secret API_KEY, which is only for api.test, not for a.test:")


@pytest.fixture
def pxs(up):
    p = Proxy("--allow", f"a.test:{up.port},api.test:{up.port}",
              "--resolve", "a.test=127.0.0.1", "--resolve", "api.test=127.0.0.1",
              "--head-timeout-ms", "3000", secrets=[("API_KEY", PH, "api.test", VALUE)])
    yield p
    assert p.stop(), "the proxy died"


def _chunked(parts):
    return b"".join(b"%x\r\n%s\r\n" % (len(x), x) for x in parts) + b"0\r\n\r\n"


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_placeholder_in_a_body_to_another_host_is_refused(pxs, up, framing):
    body = ('{"key": "%s"}' % PH).encode()
    head = f"POST http://a.test:{up.port}/p HTTP/1.1\r\n"
    if framing == "length":
        req = f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
    else:   # the placeholder over three chunks: only the body's data holds it whole
        req = (f"{head}Transfer-Encoding: chunked\r\n\r\n".encode() +
               _chunked([body[:12], body[12:30], body[30:]]))
        assert PH.encode() not in req
    s, f = _conn(pxs)
    s.sendall(req + f"GET http://a.test:{up.port}/after HTTP/1.1\r\n\r\n".encode())
    st, _, _ = read_response(f)
    assert st.startswith(REFUSED), st
    assert read_response(f) is None        # the refusal ends the connection
    s.close()
    assert up.requests == [], up.requests
    raw = up.received()
    assert b"cb-secret-" not in raw and b"/after" not in raw, raw
    log = pxs.log_text()
    assert "deny POST a.test" in log and "body carries the placeholder of the secret API_KEY" in log


@pytest.mark.parametrize("where", ["trailer", "extension"])
def test_a_placeholder_in_a_chunked_bodys_framing_is_refused(pxs, up, where):
    """Trailer fields and chunk extensions are text the body's data leaves
    out: a placeholder there is refused as one in the data is, and never
    reaches the upstream."""
    head = f"POST http://a.test:{up.port}/t HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    if where == "trailer":
        body = b"5\r\nhello\r\n0\r\nX-Key: " + PH.encode() + b"\r\n\r\n"
    else:
        body = b"5;k=" + PH.encode() + b"\r\nhello\r\n0\r\n\r\n"
    s, f = _conn(pxs)
    s.sendall(head.encode() + body)
    st, _, _ = read_response(f)
    assert st.startswith(REFUSED), st
    s.close()
    assert PH.encode() not in up.received(), up.received()
    assert up.requests == [], up.requests


def test_a_placeholder_later_in_a_streamed_body_is_refused_and_cut_short_upstream(pxs, up):
    """The head and the start of the body are upstream already; the
    placeholder comes later, split over two writes: the sandbox gets the 403,
    the upstream a request cut short, never the placeholder."""
    first = b"c" * 3000
    s, f = _conn(pxs)
    s.sendall(f"POST http://a.test:{up.port}/stream HTTP/1.1\r\n"
              f"Content-Length: {len(first) + len(PH) + 10}\r\n\r\n".encode() + first)
    deadline = time.monotonic() + 10
    while not up.received().endswith(first) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert up.received().endswith(first), up.received()[-200:]
    s.sendall(PH[:17].encode())
    time.sleep(0.3)
    s.sendall(PH[17:].encode() + b"y" * 10)
    st, _, _ = read_response(f)
    assert st.startswith(REFUSED) and st.endswith("(cut short upstream))"), st
    assert read_response(f) is None
    s.close()
    assert PH.encode() not in up.received()
    assert up.requests == [], up.requests  # the upstream saw a request cut short
    assert "body carries the placeholder of the secret API_KEY" in pxs.log_text()


def test_a_placeholder_after_the_response_began_closes_the_connection(pxs, up):
    """`Expect: 100-continue`: the upstream's 100 has reached the sandbox, so
    a 403 can no longer be the answer: the connection ends both ways."""
    s, f = _conn(pxs)
    s.sendall(f"POST http://a.test:{up.port}/continue HTTP/1.1\r\nExpect: 100-continue\r\n"
              f"Content-Length: {len(PH) + 2}\r\n\r\n".encode())
    assert f.readline() == b"HTTP/1.1 100 Continue\r\n" and f.readline() == b"\r\n"
    s.sendall(b'"' + PH.encode() + b'"')
    assert f.read() == b""                 # closed, nothing more
    s.close()
    deadline = time.monotonic() + 5
    log = pxs.log_text()
    while "closing (a response had begun)" not in log and time.monotonic() < deadline:
        time.sleep(0.05)
        log = pxs.log_text()
    assert ("the request's body carries the placeholder of the secret API_KEY, which is only "
            "for api.test: closing (a response had begun)") in log, log[-2000:]
    assert PH.encode() not in up.received() and up.requests == [], up.requests


def test_a_body_to_the_bound_host_keeps_its_placeholder(pxs, up):
    """Values go into header lines only: a body to the secret's own host
    passes as it is, placeholder and all; bodies without one pass whole."""
    body = ("c" * 70000 + PH).encode()
    s, f = _conn(pxs)
    s.sendall(f"POST http://api.test:{up.port}/b HTTP/1.1\r\nAuthorization: Bearer {PH}\r\n"
              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    st, _, _ = read_response(f)
    assert st == "HTTP/1.1 200 OK", st
    plain = b"cb-secret" * 20000          # look-alikes, no placeholder, to the other host
    s2, f2 = _conn(pxs)
    s2.sendall(f"POST http://a.test:{up.port}/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
               .encode() + _chunked([plain[:99999], plain[99999:]]))
    st, _, _ = read_response(f2)
    assert st == "HTTP/1.1 200 OK", st
    s.close()
    s2.close()
    (_, _, h1, b1), (_, _, _, b2) = sorted(up.requests, key=lambda r: r[1])
    assert h1["authorization"] == f"Bearer {VALUE}" and b1 == body
    assert b2 == plain



def _cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_refused_listen_request_leaves_no_listener_behind(pxs, up):
    """The control socket's `listen P F`: when one of its fds is refused, the
    proxy closes them all, so none of them may have joined its poll set (a
    closed fd there makes every poll return at once)."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    unix, other = socket.socketpair()
    socket.send_fds(pxs.ctl, [b"listen 1 1"], [tcp.fileno(), unix.fileno()])
    answer = pxs.ctl.recv(4096).decode()
    assert answer.startswith("error forward fd") and "not a TCP listener" in answer, answer
    for x in (tcp, unix, other):
        x.close()
    before = _cpu_s(pxs.p.pid)
    time.sleep(1)
    assert _cpu_s(pxs.p.pid) - before < 0.3, "the proxy spins"
    s, f = _conn(pxs)
    s.sendall(f"GET http://a.test:{up.port}/still HTTP/1.1\r\n\r\n".encode())
    st, _, body = read_response(f)
    assert st == "HTTP/1.1 200 OK" and b"/still" in body, (st, body)
    s.close()
