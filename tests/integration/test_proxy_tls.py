"""The egress proxy's TLS termination stays bounded and strict (issue 22):
handshakes in flight are capped and timed, a sandbox that stalls or sends
garbage costs one connection, SNI and ALPN are checked, and malformed
requests inside TLS get the same answers as outside.  The proxy program runs
alone with a secret bound to api.test (a TLS server on 127.0.0.1 with a test
CA) and to slow.test (a TCP server that accepts and never answers).
"""

import os
import random
import shutil
import socket
import ssl
import threading
import time

import pytest

from .helpers import is_cellblock
from .proxy_kit import Proxy, make_ca, make_cert, recv_all, serve_recording, skip

pytestmark = pytest.mark.cellblock_only

SECRET = "sk-tls-test-value"
PH = "cb-secret-" + "ab" * 16
PH_SLOW = "cb-secret-" + "cd" * 16     # a second secret, for slow.test alone
HANDSHAKES_MAX = 16      # CB_PROXY_HANDSHAKES_MAX
TLS_TIMEOUT_MS = 2000


class Silent:
    """Accepts TCP connections and never sends a byte; counts those that
    received something (a ClientHello)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted, self.spoken, self.conns = 0, 0, []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.conns.append(c)
            threading.Thread(target=self._read, args=(c,), daemon=True).start()

    def _read(self, c):
        try:
            if c.recv(1):
                self.spoken += 1
        except OSError:
            pass

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if not is_cellblock():
        skip("cellblock only")
    if shutil.which("openssl") is None:
        skip("openssl is needed to make the test CA (scripts/deps.sh installs it)")
    d = str(tmp_path_factory.mktemp("tls"))
    make_ca(d, "ca")
    make_cert(d, "ca", "api", ["api.test"])
    api, silent = serve_recording(SECRET, "api", d), Silent()
    port, sport = api.server_address[1], silent.port
    px = Proxy("--allow", f"api.test:{port},slow.test:{sport}",
               "--resolve", "api.test=127.0.0.1", "--resolve", "slow.test=127.0.0.1",
               "--upstream-ca", os.path.join(d, "ca.pem"), "--tls-timeout-ms", str(TLS_TIMEOUT_MS),
               secrets=[("API_KEY", PH, "api.test,slow.test", SECRET),
                        ("SLOW_KEY", PH_SLOW, "slow.test", "slow-value")])
    ca = os.path.join(d, "session.pem")
    with open(ca, "w") as f:
        f.write(px.ca)
    yield {"px": px, "api": api, "port": port, "silent": silent, "sport": sport, "ca": ca}
    alive = px.stop()
    api.shutdown()
    silent.close()
    assert alive, "the proxy died"


def _bumped(e, server_hostname="api.test", alpn=None):
    s = e["px"].request(f"CONNECT api.test:{e['port']} HTTP/1.1\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    ctx = ssl.create_default_context(cafile=e["ca"])
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx.wrap_socket(s, server_hostname=server_hostname)


def test_handshakes_in_flight_are_bounded_and_timed(env):
    n = HANDSHAKES_MAX + 4
    t0 = time.monotonic()
    clients = [env["px"].request(f"CONNECT slow.test:{env['sport']} HTTP/1.1\r\n\r\n".encode(),
                                 timeout=15) for _ in range(n)]
    time.sleep(TLS_TIMEOUT_MS / 2000)
    assert env["silent"].accepted == n        # TCP connects are not the bound...
    assert env["silent"].spoken == HANDSHAKES_MAX, env["silent"].spoken  # ...handshakes are
    for s in clients:
        reply = recv_all(s).decode("latin-1")
        assert reply.startswith(f"HTTP/1.1 504 Gateway Timeout (cellblock proxy: TLS with "
                                f"slow.test:{env['sport']} did not complete within "
                                f"{TLS_TIMEOUT_MS} ms)"), reply
        s.close()
    # the last four waited for a slot within the same deadline: TLS takes at
    # most the timeout, waiting included
    took = time.monotonic() - t0
    assert TLS_TIMEOUT_MS / 1000 <= took < 2 * TLS_TIMEOUT_MS / 1000, took
    t = _bumped(env)
    t.sendall(f"GET /v1/ok HTTP/1.1\r\nHost: api.test:{env['port']}\r\n"
              f"Authorization: Bearer {PH}\r\n\r\n".encode())
    assert b'{"ok": true}' in recv_all(t)
    t.close()


def test_a_sandbox_that_stalls_or_garbles_its_handshake_costs_one_connection(env):
    s = env["px"].request(f"CONNECT api.test:{env['port']} HTTP/1.1\r\n\r\n".encode(), timeout=15)
    assert s.recv(200).startswith(b"HTTP/1.1 200")
    t0 = time.monotonic()
    assert recv_all(s) == b""                 # closed after the TLS timeout, no hang
    assert time.monotonic() - t0 < TLS_TIMEOUT_MS / 1000 + 5
    s.close()
    for _ in range(20):
        s = env["px"].request(f"CONNECT api.test:{env['port']} HTTP/1.1\r\n\r\n".encode())
        assert s.recv(200).startswith(b"HTTP/1.1 200")
        s.sendall(os.urandom(random.randint(1, 2000)))
        recv_all(s)
        s.close()
    assert "the sandbox's TLS for api.test" in env["px"].log_text()


def test_sni_and_alpn_are_checked(env):
    with pytest.raises(ssl.SSLError):
        _bumped(env, server_hostname="elsewhere.test")
    with pytest.raises(ssl.SSLError):
        _bumped(env, alpn=["h2"])
    t = _bumped(env, alpn=["h2", "http/1.1"])
    assert t.selected_alpn_protocol() == "http/1.1"
    t.close()


@pytest.mark.parametrize("head,status", [
    (b"\x00\xff" * 50 + b"\r\n\r\n", 400),
    (b"GET /x HTTP/1.1\r\nHost: api.test\r\nHost: api.test\r\n\r\n", 400),
    (b"GET /x HTTP/1.1\r\nHost: other.test\r\n\r\n", 403),
    (b"GET http://api.test/x HTTP/1.1\r\n\r\n", 400),
    (b"CONNECT api.test:443 HTTP/1.1\r\n\r\n", 400),
    (b"GET /x HTTP/1.1\r\nHost: api.test\r\nX: " + b"y" * 20000 + b"\r\n\r\n", 431),
    (b"POST /x HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
])
def test_malformed_requests_inside_tls_are_answered_inside_tls(env, head, status):
    t = _bumped(env)
    t.sendall(head)
    reply = recv_all(t).decode("latin-1")
    assert reply.startswith(f"HTTP/1.1 {status} "), reply
    t.close()
    assert SECRET not in reply


def test_random_bytes_inside_tls_leave_the_proxy_serving(env):
    rnd = random.Random(22)
    for i in range(40):
        t = _bumped(env)
        t.sendall(bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 400))) + b"\r\n\r\n")
        recv_all(t)
        t.close()
    t = _bumped(env)
    t.sendall(f"GET /v1/ok HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer {PH}\r\n\r\n".encode())
    assert b'{"ok": true}' in recv_all(t)
    t.close()


def test_inside_tls_a_body_with_another_hosts_placeholder_is_refused(env):
    """A request inside TLS to api.test whose body carries the placeholder of
    SLOW_KEY (bound to slow.test only): a 403 inside TLS, with its head, and
    split over two TLS records after the head went upstream (cut short
    there).  Either way api.test never gets it.  A body with api.test's own secret's
    placeholder passes unchanged."""
    body = ('{"a": "%s", "b": "%s"}' % (PH, PH_SLOW)).encode()
    head = (f"POST /v1/ok HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer {PH}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    t = _bumped(env)
    t.sendall(head + body)
    reply = recv_all(t).decode("latin-1")
    t.close()
    assert reply.startswith("HTTP/1.1 403 Forbidden (cellblock proxy: the request's body carries "
                            "the placeholder of the secret SLOW_KEY, which is only for slow.test, "
                            f"not for api.test:{env['port']})"), reply
    t = _bumped(env)
    t.sendall(head + body[:len(body) - 20])
    time.sleep(0.3)
    t.sendall(body[len(body) - 20:])
    late = recv_all(t).decode("latin-1")
    t.close()
    assert late.startswith(reply.split("\r\n")[0][:-1] + " (cut short upstream))"), late
    assert not any(PH_SLOW.encode() in b for b in env["api"].bodies if b), env["api"].bodies
    assert "body carries the placeholder of the secret SLOW_KEY" in env["px"].log_text()
    own = ('{"a": "%s"}' % PH).encode()
    t = _bumped(env)
    t.sendall(f"POST /v1/ok HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer {PH}\r\n"
              f"Content-Length: {len(own)}\r\n\r\n".encode() + own)
    assert b'{"ok": true, "got": ' in recv_all(t)
    t.close()
    assert own in env["api"].bodies           # a body is never changed
