#!/usr/bin/env python3
"""seeds.py - writes the seed inputs of fuzz/corpus/<target>/seed-*.

Run from anywhere (`python3 fuzz/seeds.py`); it rewrites only seed-* files,
never the regress-* inputs of findings or inputs merged from long runs.
Each seed is a small, valid-looking input in the harness's own framing (see
the top of each fuzz_<target>.c): parts separated by 0xff.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = b"\xff"


def j(v):
    return json.dumps(v, separators=(",", ":")).encode()


def hdr(msg_type, msg_id="a1"):
    return j({"msg_id": msg_id, "msg_type": msg_type, "session": "s", "username": "u",
              "date": "2024-01-01T00:00:00.000000Z", "version": "5.3"})


def deep(n):
    return b"[" * n + b"]" * n


def wire():
    ex = hdr("execute_request")
    yield "signed-execute", bytes([1 | (1 << 2)]) + SEP.join(
        [b"client-1", ex, b"{}", b"{}", j({"code": "1+1", "silent": False})])
    yield "signed-2-idents-2-buffers", bytes([1 | (2 << 2)]) + SEP.join(
        [b"proxy", b"client", hdr("comm_msg"), b"{}", j({"m": 1}), j({"comm_id": "c", "data": {}}),
         b"\x00\x01", b"buf"])
    yield "signed-deep-content", bytes([1]) + SEP.join(
        [hdr("execute_request"), b"{}", b"{}", b'{"code":' + deep(80) + b"}"])
    yield "signed-no-msg-id", bytes([1]) + SEP.join([j({"msg_type": "x"}), b"{}", b"{}", b"{}"])
    yield "signed-content-not-json", bytes([1]) + SEP.join([hdr("x"), b"{}", b"{}", b"{nope"])
    yield "signed-content-array", bytes([1]) + SEP.join([hdr("x"), b"[]", b"{}", b"[1]"])
    yield "raw-bogus-signature", bytes([0]) + SEP.join(
        [b"id", b"<IDS|MSG>", b"0" * 64, ex, b"{}", b"{}", b"{}"])
    yield "raw-uppercase-signature", bytes([0]) + SEP.join(
        [b"<IDS|MSG>", b"A" * 64, ex, b"{}", b"{}", b"{}"])
    yield "raw-short", bytes([0]) + SEP.join([b"<IDS|MSG>", b"sig", b"{}"])
    yield "raw-no-delimiter", bytes([0]) + SEP.join([b"a", b"b", b"c"])
    yield "keyless-execute", bytes([2]) + SEP.join(
        [b"<IDS|MSG>", b"", ex, b"{}", b"{}", j({"code": "x"})])
    yield "keyless-deep-header", bytes([2]) + SEP.join(
        [b"<IDS|MSG>", b"", b'{"a":' + deep(70) + b"}", b"{}", b"{}", b"{}"])
    yield "replay-history-3", bytes([3 | (2 << 2)]) + bytes([0, 1, 2, 3, 0, 4, 1, 1, 5, 0, 9, 41])
    yield "replay-history-1", bytes([3]) + bytes([7, 7, 8, 7, 8, 8])


def conn():
    base = {"shell_port": 50001, "iopub_port": 50002, "stdin_port": 50003,
            "control_port": 50004, "hb_port": 50005, "ip": "127.0.0.1", "key": "a0b1c2",
            "transport": "tcp", "signature_scheme": "hmac-sha256", "kernel_name": "cellblock"}
    yield "tcp", j(base)
    yield "ipc", j(dict(base, transport="ipc", ip="/tmp/kernel-1"))
    yield "ipv6", j(dict(base, ip="::1"))
    yield "no-key", j(dict(base, key=""))
    yield "no-scheme", j({k: v for k, v in base.items() if k != "signature_scheme"})
    yield "md5-scheme", j(dict(base, signature_scheme="hmac-md5"))
    yield "port-range", j(dict(base, hb_port=70000))
    yield "port-string", j(dict(base, shell_port="1"))
    yield "udp", j(dict(base, transport="udp"))
    yield "duplicate-key", b'{"key":"a","key":"b"}'
    yield "key-escapes", j(dict(base, key="\u00e9\\\"\u2603"))
    yield "long-ip", j(dict(base, ip="a" * 300))
    yield "array", b"[1,2]"


def frame():
    frames = [
        {"type": "hello", "version": 2, "python_version": "3.11.2", "shell": "ipython",
         "shell_version": "8.5"},
        {"type": "started", "seq": 1},
        {"type": "display", "seq": 1, "data": {"text/plain": "x", "image/png": "iVBO"},
         "metadata": {"image/png": {"width": 1}, "cellblock": {"artifact": {"path": "a"}}},
         "transient": {"display_id": "d1"}},
        {"type": "update_display", "seq": 1, "data": {"text/plain": "y"},
         "transient": {"display_id": "d1"}},
        {"type": "execute_result", "seq": 1, "data": {"text/plain": "2"}, "metadata": {}},
        {"type": "clear_output", "seq": 1, "wait": True},
        {"type": "error", "seq": 1, "ename": "ValueError", "evalue": "x",
         "traceback": ["a", "b"]},
        {"type": "input_request", "seq": 1, "prompt": "? ", "password": False},
        {"type": "done", "seq": 1, "status": "ok", "user_expressions": {"a": {}}, "payload": []},
        {"type": "done", "seq": 2, "status": "error", "ename": "E", "evalue": "v",
         "traceback": ["t"]},
        {"type": "complete_reply", "seq": 3, "matches": ["print", "prod"], "cursor_start": 0,
         "cursor_end": 2, "metadata": {}},
        {"type": "inspect_reply", "seq": 4, "found": True, "data": {"text/plain": "doc"},
         "metadata": {}},
        {"type": "is_complete_reply", "seq": 5, "status": "incomplete", "indent": "    "},
        {"type": "bad_request", "error": "cannot read"},
        {"type": "comm_open", "seq": 6, "comm_id": "c1", "target_name": "jupyter.widget",
         "target_module": "m", "data": {"state": {}}, "metadata": {}, "buffers": ["AAE="]},
        {"type": "comm_msg", "seq": 6, "comm_id": "c1", "data": {"method": "update"}},
        {"type": "comm_close", "seq": 6, "comm_id": "c1", "data": {}},
        {"type": "comm_done", "seq": 6},
    ]
    for f in frames:
        yield "framed-" + f["type"], b"\x01" + j(f)
    yield "framed-all", b"\x01" + SEP.join(j(f) for f in frames)
    yield "framed-deep-metadata", b"\x01" + j({"type": "display", "seq": 1,
                                              "data": {"text/plain": "x"}})[:-1] + \
        b',"metadata":{"a":' + deep(70) + b"}}"
    yield "framed-wide-metadata", b"\x01" + j({"type": "display", "seq": 1,
                                              "data": {"text/plain": "x"},
                                              "metadata": {"m": [{}] * 500}})
    yield "framed-duplicate-type", b'\x01{"type":"done","type":"hello","seq":1,"status":"ok"}'
    two = j(frames[1]) + j(frames[8])
    raw = b"".join(struct.pack(">I", len(x)) + x for x in (j(frames[1]), j(frames[8])))
    yield "raw-two-frames", b"\x00" + raw
    yield "raw-partial", b"\x00" + struct.pack(">I", len(two) + 10) + two
    yield "raw-zero-length", b"\x00" + struct.pack(">I", 0)
    yield "raw-too-long", b"\x00" + struct.pack(">I", (8 << 20) + 1) + b"{}"


def artifacts():
    png = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 2, 3) + \
        b"\x08\x06\x00\x00\x00" + b"\x00" * 4

    def e(kind, path, data=b""):
        return bytes([kind]) + path + b"\x00" + data
    yield "files", b"\x00" + SEP.join([
        e(0, b"a.txt", b"hello"), e(0, b"plot.png", png), e(0, b"d/t.csv", b"a,b\n1,2\n"),
        e(0, b"r.json", b'{"a":[1,2]}'), e(0, b"p.pdf", b"%PDF-1.4\n"),
        e(0, b"s.svg", b'<svg xmlns="http://www.w3.org/2000/svg"/>'), e(0, b"x.bin", b"\x00\x01"),
        e(0, b"page.html", b"<p>hi</p>"), e(0, b"notes.md", b"# t")])
    yield "links", b"\x00" + SEP.join([
        e(2, b"l.txt", b"../outside/secret.txt"), e(2, b"abs.txt", b"/etc/hostname"),
        e(2, b"dir", b"../outside"), e(0, b"dir2/f.txt", b"x"), e(2, b"dir2/up.png",
                                                                 b"../../outside/secret.png"),
        e(3, b"hard.png"), e(4, b"fifo.txt"), e(0, b".hidden.txt", b"h"),
        e(0, b".git/config.txt", b"h")])
    yield "deep-images-binary", bytes([1 | 2 | (12 << 3)]) + SEP.join([
        e(0, b"a/b/c/d/e.png", png), e(0, b"a/b/x.png", b"not a png"), e(0, b"a/y.png", png),
        e(1, b"a/b/c/d/e/f")])
    yield "change-rename-remove", bytes([4]) + SEP.join([
        e(0, b"a.txt", b"one"), e(0, b"b.txt", b"two"), e(0, b"c.txt", b"three"),
        e(5, b"a.txt", b"ONE!"), e(6, b"b.txt", b"b2.txt"), e(7, b"c.txt")])
    yield "names", bytes([16 << 3]) + SEP.join([
        e(0, b"caf\xc3\xa9.txt", b"utf8"), e(0, b"bad\xfe.txt", b"latin"),
        e(0, b"new\nline.txt", b"nl"), e(0, b"conftest.py", b"x"), e(0, b"a" * 250 + b".txt"),
        e(0, b"../escape.txt", b"x"), e(0, b"/abs.txt", b"x"), e(0, b"link.png", png),
        e(0, b"sub/x.png", png), e(0, b"existing.png", png), e(0, b"big.txt", b"x" * 3000)])
    yield "many", bytes([3 << 3]) + SEP.join(
        [e(0, b"f%d.txt" % i, b"%d" % i) for i in range(30)])


def dispatch():
    def m(t, ch, content):
        return bytes([t, ch]) + (content if isinstance(content, bytes) else j(content))
    KI, EX, CO, IN, IC, HI, CI, OPEN, MSG, CLOSE, CONN, INT, SHUT, INPUT, DEBUG, X = range(16)
    yield "kernel-info", m(KI, 0, {}) + SEP + m(KI, 1, {})
    yield "execute", m(EX, 0, {"code": "1", "silent": False, "store_history": True,
                               "user_expressions": {}, "allow_stdin": False,
                               "stop_on_error": True})
    yield "execute-abort-queued", SEP.join([m(EX, 0, {"code": "1"}), m(EX, 0, {"code": "2"}),
                                            m(KI, 0, {})])
    yield "execute-bad-shapes", SEP.join([m(EX, 0, {"code": 1}),
                                          m(EX, 0, {"code": "x", "user_expressions": []}),
                                          m(EX, 0, {"code": "x", "silent": True,
                                                    "stop_on_error": False})])
    yield "assist", SEP.join([m(CO, 0, {"code": "pri", "cursor_pos": 3}),
                              m(IN, 0, {"code": "len", "cursor_pos": 1, "detail_level": 1}),
                              m(IC, 0, {"code": "for i in x:"})])
    yield "assist-bad-shapes", SEP.join([m(CO, 0, {"code": "pri"}), m(IN, 0, {"cursor_pos": 1}),
                                         m(IC, 0, {"code": 3}), m(CO, 0, [])])
    yield "history", SEP.join([m(EX, 0, {"code": "a=1", "stop_on_error": False}),
                               m(HI, 0, {"hist_access_type": "tail", "n": 3, "output": True}),
                               m(HI, 0, {"hist_access_type": "range", "start": 0, "stop": 9}),
                               m(HI, 0, {"hist_access_type": "search", "pattern": "a*",
                                         "unique": True})])
    yield "comms", SEP.join([m(CI, 0, {}), m(OPEN, 0, {"comm_id": "c", "target_name": "t",
                                                         "data": {}}),
                             m(MSG, 0, {"comm_id": "c", "data": {}}), m(CLOSE, 0, {})])
    yield "control", SEP.join([m(INT, 1, {}), m(INT, 0, {}), m(CONN, 0, {}), m(DEBUG, 1, {})])
    yield "shutdown-then-more", SEP.join([m(SHUT, 0, {"restart": True}), m(KI, 0, {}),
                                          m(SHUT, 1, {"restart": False})])
    yield "stdin", SEP.join([m(INPUT, 2, {"value": "x"}), m(KI, 2, {})])
    yield "deep", SEP.join([m(EX, 0, b'{"code":' + deep(80) + b"}"),
                            m(X, 1, b'{"a":' + deep(65) + b"}"), m(INPUT, 2, deep(70))])
    yield "not-json", SEP.join([m(EX, 0, b"{"), m(KI, 1, b"[]"), m(X, 0, b"")])


def proxy_http():
    req, resp = b"\x00", b"\x01"
    yield "connect", req + b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"
    yield "connect-v6", req + b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n"
    yield "absolute", req + (b"GET http://example.com:8080/a?b=1 HTTP/1.1\r\nHost: other\r\n"
                             b"Connection: keep-alive, Upgrade\r\nProxy-Authorization: x\r\n"
                             b"Upgrade: h2c\r\nTE: trailers\r\n\r\nGET / HTTP/1.1\r\n")
    yield "origin-chunked", req + (b"POST /upload HTTP/1.1\r\nHost: [::1]:9000\r\n"
                                   b"Transfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n")
    yield "http10-length", req + (b"PUT http://h/ HTTP/1.0\r\nContent-Length: 5\r\n"
                                  b"Connection: keep-alive\r\n\r\nhello")
    yield "smuggle-cl-te", req + (b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n"
                                  b"Transfer-Encoding: chunked\r\n\r\n")
    yield "two-hosts", req + b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"
    yield "folded", req + b"GET http://h/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n"
    yield "bare-lf", req + b"GET http://h/ HTTP/1.1\nX: a\n\n"
    yield "userinfo", req + b"GET http://u:p@h/ HTTP/1.1\r\n\r\n"
    yield "http2", req + b"GET http://h/ HTTP/2.0\r\n\r\n"
    yield "incomplete", req + b"GET http://h/ HTTP/1.1\r\nHost: h\r\n"
    yield "resp-length", resp + b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello world\n"
    yield "resp-chunked", resp + (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n"
                                  b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n")
    yield "resp-10-close", resp + b"HTTP/1.0 404\nConnection: close\n\n"
    yield "resp-bad", resp + b"HTTP/1.1 099 Nope\r\n\r\n"


def proxy_body():
    # mode byte (bits 0-1: 0 chunked, 1 Content-Length, 2 EOF; bits 2-7 and
    # the seed byte: the length), seed byte (the cuts), the stream
    yield "chunked", b"\x00\x07" + (b"4\r\nWiki\r\n5;ext=\"v\"\r\npedia\r\n"
                                     b"E\r\n in\r\n\r\nchunks.\r\n0\r\n\r\nGET / HTTP/1.1\r\n")
    yield "chunked-trailer", b"\x00\x00" + b"1\r\nx\r\n0\r\nX-Sum: 1\r\nY:\r\n\r\nrest"
    yield "chunked-long-size", b"\x00\x21" + b"fffffffffffffff\r\nabc"
    yield "chunked-bad-crlf", b"\x00\x05" + b"3\r\nabcd\r\n0\r\n\r\n"
    yield "chunked-lf", b"\x00\x09" + b"3\nabc\n0\n\n"
    yield "length", b"\x01\x0b" + b"hello world, and the next request"
    yield "length-short", b"\x05\x00" + b"only a few bytes"
    yield "eof", b"\x02\x30" + b"everything until the close"


def proxy_secrets():
    # mode byte (bits 0-1: host api.test, tok.test, nope.test, none; bits
    # 2-6: the output's size; bit 7: a table), then a head where \x01-\x03
    # stand for the placeholders and text between \x04s is base64-encoded
    yield "bound", b"\x00GET / HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: \x01\r\n\r\n"
    yield "basic", b"\x00GET / HTTP/1.1\r\nAuthorization: Basic \x04user:\x03\x04\r\n\r\n"
    yield "basic-two", b"\x00GET / HTTP/1.1\r\nauthorization:\tbasic \x04\x01:\x03\x04 \r\n\r\n"
    yield "basic-foreign", b"\x00GET / HTTP/1.1\r\nAuthorization: Basic \x04x:\x02\x04\r\n\r\n"
    yield "bearer-tok", b"\x01POST /x HTTP/1.1\r\nAuthorization: Bearer \x02\r\n\r\n"
    yield "foreign", b"\x02GET / HTTP/1.1\r\nX: \x01\r\n\r\n"
    yield "request-line", b"\x00GET /?k=\x01 HTTP/1.1\r\nX: \x01\x01\r\n\r\n"
    yield "small-out", b"\x14GET / HTTP/1.1\r\nA: \x01\r\nB: \x03\r\n\r\n"
    yield "no-host", b"\x03GET / HTTP/1.1\r\nX: cb-secret-0123\r\n\r\n"
    ph = b"cb-secret-0123456789abcdef0123456789abcdef"
    yield "table", b"\x80A\t" + ph + b"\tx.test,Y.Test.\tvalue one\nB_2\t" + ph + b"\t[::1]\tv\n"


def main():
    for target, gen in [("wire", wire), ("conn", conn), ("frame", frame),
                        ("artifacts", artifacts), ("dispatch", dispatch),
                        ("proxy_http", proxy_http), ("proxy_body", proxy_body),
                        ("proxy_secrets", proxy_secrets)]:
        d = os.path.join(HERE, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            if f.startswith("seed-"):
                os.unlink(os.path.join(d, f))
        for name, data in gen():
            with open(os.path.join(d, "seed-" + name), "wb") as fh:
                fh.write(data)


if __name__ == "__main__":
    main()
