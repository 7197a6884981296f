"""What the egress-proxy tests share: the loopback "hosts" they reach (a plain
HTTP server, a TLS server with a CA made here that also serves a tiny PEP
503 index, a server on a port that is not listed), a kernel started with
extra flags whose log is kept, the proxy program started alone with small
bounds, and a fake DNS server.  Everything listens on 127.0.0.1 only.
"""

import base64
import contextlib
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time
import zipfile

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from .conftest import BUILD
from .helpers import TIMEOUT, Kernel, descendants, execute, is_cellblock

PROXY_BIN = os.path.join(BUILD, "libexec", "cellblock", "cellblock-proxy")
BIG = 64 << 20          # bytes the /big endpoint can send
MUST_WORK = os.environ.get("CB_MUST_WORK") == "1"


def landlock_abi():
    """The Landlock ABI this kernel offers (landlock_create_ruleset with
    LANDLOCK_CREATE_RULESET_VERSION; the same number on every architecture),
    0 without it."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(abi, 0)


def proc_status(pid):
    """/proc/PID/status as {field: value}."""
    with open(f"/proc/{pid}/status") as f:
        return {k: v.strip() for k, _, v in (l.partition(":") for l in f)}


def skip(reason):
    if MUST_WORK:
        pytest.fail("skip not allowed (CB_MUST_WORK=1): " + reason)
    pytest.skip(reason)


@contextlib.contextmanager
def ipykernel():
    """The stock ipykernel, the control of the comparisons (skipped without it)."""
    if "python3" not in KernelSpecManager().find_kernel_specs():
        skip("no python3 kernelspec for the control")
    k = Kernel("python3").start(timeout=60)
    try:
        yield k
    finally:
        k.stop(check=False)


# --------------------------------------------------------------------------
# the allowed "hosts": servers on 127.0.0.1
# --------------------------------------------------------------------------

def wheel():
    files = {"tinypkg/__init__.py": b"VALUE = 42\n",
             "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
             "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: cellblock-test\n"
                                            b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    buf, record = io.BytesIO(), []
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append("tinypkg-1.0.dist-info/RECORD,,")
        z.writestr("tinypkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return buf.getvalue()


WHEEL = wheel()
WHEEL_NAME = "tinypkg-1.0-py3-none-any.whl"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, body, ctype="text/plain"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        p = self.path
        if p.startswith("/headers"):
            # what arrived, for the secrets tests: every header as sent
            self._send(json.dumps([[k, v] for k, v in self.headers.items()]).encode(),
                       "application/json")
        elif p.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", p.split("?to=", 1)[1] if "?to=" in p else "/hello")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif p.startswith("/hello"):
            self._send(b"hello from %s, Host %s" % (self.server.label.encode(),
                                                    self.headers.get("Host", "").encode()))
        elif p.rstrip("/") == "/simple":
            self._send(b'<html><body><a href="/simple/tinypkg/">tinypkg</a></body></html>',
                       "text/html")
        elif p.rstrip("/") == "/simple/tinypkg":
            sha = hashlib.sha256(WHEEL).hexdigest()
            self._send(f'<html><body><a href="/files/{WHEEL_NAME}#sha256={sha}">{WHEEL_NAME}</a>'
                       f'</body></html>'.encode(), "text/html")
        elif p == "/files/" + WHEEL_NAME:
            self._send(WHEEL, "application/octet-stream")
        elif p.startswith("/big"):
            self.send_response(200)
            self.send_header("Content-Length", str(BIG))
            self.end_headers()
            chunk = b"x" * 65536
            try:
                for _ in range(BIG // len(chunk)):
                    self.wfile.write(chunk)
            except OSError:
                pass   # the proxy cut it: what the test wants
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def do_POST(self):
        """/upload: reads the body, answers how many bytes it got."""
        n = int(self.headers.get("Content-Length") or 0)
        got = len(self.rfile.read(n)) if n else 0
        self._send(b"got %d" % got)

    def log_message(self, *args):
        pass


def serve(label, tls_ctx=None):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.label = label
    if tls_ctx is not None:
        srv.socket = tls_ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def hosts():
    if not is_cellblock():
        skip("cellblock only")
    if not os.access(PROXY_BIN, os.X_OK):
        skip(f"{PROXY_BIN} not built; run make")
    if shutil.which("openssl") is None:
        skip("openssl is needed to make the test CA (scripts/deps.sh installs it)")
    tmp = tempfile.mkdtemp(prefix="cb-net-")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=cellblock test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign", cwd=tmp)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
             "-subj", "/CN=tls.test", cwd=tmp)
    with open(os.path.join(tmp, "ext.cnf"), "w") as f:
        f.write("subjectAltName=DNS:tls.test\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "ext.cnf", cwd=tmp)
    os.chmod(tmp, 0o755)
    os.chmod(os.path.join(tmp, "ca.pem"), 0o644)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(tmp, "srv.pem"), os.path.join(tmp, "srv.key"))
    plain, tls, other = serve("plain"), serve("tls", ctx), serve("other")
    h = {"dir": tmp, "ca": os.path.join(tmp, "ca.pem"),
         "plain": plain.server_address[1], "tls": tls.server_address[1],
         "other": other.server_address[1]}
    yield h
    for s in (plain, tls, other):
        s.shutdown()
        s.server_close()
    shutil.rmtree(tmp, ignore_errors=True)


class AllowKernel(Kernel):
    """The built cellblock kernelspec with extra flags, its stderr (the log,
    where the proxy's decisions go) kept in a file."""

    def __init__(self, args, log_path, env=None):
        super().__init__()
        self.args, self.log_path, self.env = args, log_path, dict(env or {})

    def start(self, timeout=TIMEOUT):
        self._log = open(self.log_path, "w")
        return super().start(timeout, extra_arguments=self.args, env=self.env, stderr=self._log)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def log_with(self, want, timeout=10):
        """The log once every line of want is in it (the proxy's log reaches
        the kernel's through the launcher, a moment after the reply)."""
        deadline = time.monotonic() + timeout
        log = self.log()
        while not all(w in log for w in want) and time.monotonic() < deadline:
            time.sleep(0.1)
            log = self.log()
        return log

    def run(self, code, timeout=TIMEOUT):
        r = execute(self.kc, code, timeout=timeout)
        assert r.status == "ok", r.error_text() + "\n--- log:\n" + self.log()[-3000:]
        return r.stream("stdout")

    def proxy_pid(self):
        for p in descendants(self.pid):
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if os.path.basename(f.read().split(b"\0")[0]) == b"cellblock-proxy":
                        return p
            except OSError:
                pass
        return None


class Proxy:
    """cellblock-proxy alone, on a listener of ours.  secrets: [(NAME,
    PLACEHOLDER, HOSTS, VALUE)] handed over as the launcher does (a pipe),
    with a control socket whose first message is the session CA (self.ca)."""

    def __init__(self, *args, secrets=None):
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        r, w = os.pipe()
        self.log = tempfile.TemporaryFile()
        fds, extra, self.ctl, self.ca = [self.lsock.fileno(), w], [], None, None
        if secrets is not None:
            self.ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sr, sw = os.pipe()
            os.write(sw, "".join("\t".join(s) + "\n" for s in secrets).encode())
            os.close(sw)
            fds += [theirs.fileno(), sr]
            extra = ["--ctl-fd", str(theirs.fileno()), "--secrets-fd", str(sr)]
        self.p = subprocess.Popen([PROXY_BIN, "--listen-fd", str(self.lsock.fileno()),
                                   "--ready-fd", str(w), "--log-level", "info", *extra, *args],
                                  pass_fds=fds, stderr=self.log)
        os.close(w)
        if secrets is not None:
            os.close(sr)
            theirs.close()
        ready = os.read(r, 512)
        os.close(r)
        assert ready == b"", ready
        if self.ctl is not None:
            msg = self.ctl.recv(65536).decode()
            assert msg.startswith("ca "), msg
            self.ca = msg[3:]

    def log_text(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def request(self, data, timeout=10):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.sendall(data)
        return s

    def stop(self):
        alive = self.p.poll() is None
        if os.environ.get("CB_SANITIZER_CHECK"):   # a sanitized build: its reports go to stderr
            text = self.log_text()
            assert "runtime error" not in text and "Sanitizer" not in text, text[-4000:]
        self.p.kill()
        self.p.wait(10)
        self.lsock.close()
        if self.ctl is not None:
            self.ctl.close()
        return alive


def recv_all(s, limit=1 << 16):
    data = b""
    while len(data) < limit:
        try:
            b = s.recv(4096)
        except (ConnectionResetError, socket.timeout):
            break
        if not b:
            break
        data += b
    return data


def dns_server(answers):
    """A fake DNS server on 127.0.0.1 (UDP): answers A queries for the names
    in `answers` with the given IPv4 address, NXDOMAIN otherwise."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                q, peer = sock.recvfrom(512)
            except socket.timeout:
                continue
            qid, qd = q[:2], q[12:]
            labels, i = [], 0
            while qd[i]:
                labels.append(qd[i + 1:i + 1 + qd[i]].decode())
                i += qd[i] + 1
            question = qd[:i + 5]
            qtype = struct.unpack("!H", qd[i + 1:i + 3])[0]
            addr = answers.get(".".join(labels).lower())
            if addr and qtype == 1:
                ans = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + socket.inet_aton(addr)
                sock.sendto(qid + b"\x81\x80" + struct.pack("!HHHH", 1, 1, 0, 0) + question + ans,
                            peer)
            else:
                rcode = b"\x81\x80" if addr else b"\x81\x83"
                sock.sendto(qid + rcode + struct.pack("!HHHH", 1, 0, 0, 0) + question, peer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return sock, stop, t


# --------------------------------------------------------------------------
# an upstream that records every byte it is sent
# --------------------------------------------------------------------------

class RecordingUpstream:
    """An HTTP/1.1 server on 127.0.0.1 that keeps every connection alive
    whatever it is asked (it ignores `Connection: close`, as a lenient shared
    front end may), answers each request it parses with a Content-Length body
    naming it, and records the raw bytes of each connection and the requests
    it parsed from them.  Paths: /close (a body delimited by closing the
    connection), /chunked (a chunked body with a trailer), /overlong (five
    bytes announced, more sent), anything else: "conn N req M PATH Host H".
    `Expect: 100-continue` gets a 100 first."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.raw = []          # bytes received, one entry per connection
        self.requests = []     # (conn, request line, {lower-case name: value}, body)
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.stopping = True
        self.sock.close()

    def received(self):
        with self.lock:
            return b"".join(self.raw)

    def _accept(self):
        while not self.stopping:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                n = len(self.raw)
                self.raw.append(b"")
            threading.Thread(target=self._serve, args=(s, n), daemon=True).start()

    def _serve(self, s, n):
        s.settimeout(10)
        buf = b""

        def more():
            nonlocal buf
            b = s.recv(65536)
            if not b:
                raise EOFError
            with self.lock:
                self.raw[n] += b
            buf += b

        def line():
            nonlocal buf
            while b"\r\n" not in buf:
                more()
            ln, buf = buf.split(b"\r\n", 1)
            return ln

        def take(k):
            nonlocal buf
            while len(buf) < k:
                more()
            out, buf = buf[:k], buf[k:]
            return out

        try:
            while True:
                reqline = line().decode("latin-1")
                headers = {}
                while True:
                    h = line().decode("latin-1")
                    if not h:
                        break
                    k, _, v = h.partition(":")
                    headers[k.strip().lower()] = v.strip()
                if headers.get("expect", "").lower() == "100-continue":
                    s.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                body = b""
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    while True:
                        size = int(line().split(b";")[0], 16)
                        if size == 0:
                            while line():
                                pass
                            break
                        body += take(size)
                        take(2)
                elif "content-length" in headers:
                    body = take(int(headers["content-length"]))
                with self.lock:
                    self.requests.append((n, reqline, headers, body))
                    m = sum(1 for r in self.requests if r[0] == n)
                path = reqline.split(" ")[1]
                if path == "/close":
                    s.sendall(b"HTTP/1.1 200 OK\r\n\r\nall of it, then the end")
                    break
                if path == "/chunked":
                    s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              b"4\r\nchun\r\n3;x=y\r\nked\r\n0\r\nX-Trailer: t\r\n\r\n")
                    continue
                if path == "/overlong":
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfive!"
                              b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nforged!")
                    continue
                text = (f"conn {n} req {m} {path} Host {headers.get('host', '')}").encode()
                if reqline.startswith("HEAD "):
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(text))
                    continue
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(text), text))
        except (EOFError, OSError, ValueError):
            pass
        finally:
            s.close()


def read_response(f, head_only=False):
    """One response from f (a socket's makefile("rb"), kept for the whole
    connection), framed as a client would: (status line, headers, body);
    None at EOF before a status line."""
    status = f.readline()
    while status.startswith(b"HTTP/1.1 100"):
        while f.readline() not in (b"\r\n", b""):
            pass
        status = f.readline()
    if not status:
        return None
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    body = b""
    if head_only:
        pass
    elif headers.get("transfer-encoding") == "chunked":
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b""):
                    pass
                break
            body += f.read(size)
            f.read(2)
    elif "content-length" in headers:
        body = f.read(int(headers["content-length"]))
    else:
        body = f.read()
    return status.decode("latin-1").rstrip("\r\n"), headers, body


# --------------------------------------------------------------------------
# TLS hosts for the secrets tests: a test CA, servers that record, never echo
# --------------------------------------------------------------------------

def make_ca(d, name):
    """A CA (name.key, name.pem) in directory d."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign", cwd=d)


def make_cert(d, ca, name, sans):
    """A server certificate name.pem/name.key for the DNS names sans, signed by ca."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
            f"{name}.csr", "-subj", f"/CN={sans[0]}", cwd=d)
    with open(os.path.join(d, f"{name}.cnf"), "w") as f:
        f.write("subjectAltName=" + ",".join("DNS:" + s for s in sans) +
                "\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.cnf",
            cwd=d)


class RecordingHandler(http.server.BaseHTTPRequestHandler):
    """An API that wants `Authorization: Bearer <server.secret>` (or Basic
    with that password, as pip sends it) and never sends it back: it records
    what it was sent in server.seen and answers {"ok": ...}.  Also a PEP 503
    index behind the same check, and redirects elsewhere."""
    protocol_version = "HTTP/1.1"

    def _reply(self, code, body, ctype="application/json", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self):
        a = self.headers.get("Authorization", "")
        s = self.server.secret
        basic = base64.b64encode(f"__token__:{s}".encode()).decode()
        return a in (f"Bearer {s}", f"Basic {basic}")

    def do_GET(self):
        self.server.seen.append((self.path, self.headers.get("Authorization", ""),
                                 self.headers.get("X-Api-Key", "")))
        p = self.path
        if p.startswith("/redirect?to="):
            return self._reply(302, b"", extra=[("Location", p.split("=", 1)[1])])
        if not self._authorized():
            return self._reply(401, b'{"ok": false}', extra=[("WWW-Authenticate", 'Basic realm="t"')])
        if p.rstrip("/") == "/simple":
            return self._reply(200, b'<a href="/simple/tinypkg/">tinypkg</a>', "text/html")
        if p.rstrip("/") == "/simple/tinypkg":
            sha = hashlib.sha256(WHEEL).hexdigest()
            return self._reply(200, f'<a href="/files/{WHEEL_NAME}#sha256={sha}">{WHEEL_NAME}</a>'
                               .encode(), "text/html")
        if p == "/files/" + WHEEL_NAME:
            return self._reply(200, WHEEL, "application/octet-stream")
        return self._reply(200, b'{"ok": true}')

    def _body(self):
        """The request's body, Content-Length or chunked; None when the
        connection ended inside it."""
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            return body if len(body) == n else None
        body = b""
        while True:
            line = self.rfile.readline(1024)
            if not line.strip():
                return None
            size = int(line.split(b";")[0], 16)
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b""):
                    pass
                return body
            body += self.rfile.read(size)
            if self.rfile.read(2) != b"\r\n":
                return None

    def do_POST(self):
        """A body, kept in server.bodies whole (bounded by the tests' sizes);
        a request cut short is kept as None, and not answered."""
        body = self._body()
        self.server.bodies.append(body)
        if body is None:
            self.close_connection = True
            return
        self.server.seen.append((self.path, self.headers.get("Authorization", ""),
                                 self.headers.get("X-Api-Key", "")))
        if not self._authorized():
            return self._reply(401, b'{"ok": false}')
        return self._reply(200, b'{"ok": true, "got": %d}' % len(body))

    def log_message(self, *args):
        pass


def serve_recording(secret, cert=None, d=None):
    """A RecordingHandler server on 127.0.0.1, TLS with cert (a name in d) if given."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingHandler)
    srv.daemon_threads = True
    srv.secret, srv.seen, srv.bodies = secret, [], []
    if cert is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(d, cert + ".pem"), os.path.join(d, cert + ".key"))
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv
