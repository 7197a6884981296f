"""cellblock runner: frames on fd 3 (docs/RUNNER_PROTOCOL.md, section 3).

A frame is a 4-byte big-endian length and a UTF-8 JSON object.  This module
encodes and decodes them (with the interpreter's built-in _json, never
importing the json package at start-up), writes them under the ordering rule
(stdout/stderr flushed first; frames in _ACKED wait for the kernel's ack),
reads requests and acks from any thread, and answers a frame it cannot use
with bad_request.  EOF on fd 3 ends the runner.

Part of the runner core (cb_core.py loads it and adopts what the rest
calls); its state lives in cb_core's _State."""

import sys
import os
import _thread

_runner = sys.modules["_cellblock_runner"]
_S = _runner._S
_std = _runner._std
_FD = _runner._FD
_SIG_INPUT, _SIG_USER = _runner._SIG_INPUT, _runner._SIG_USER

_FRAME_MAX = 8 * 1024 * 1024     # CB_RUNNER_FRAME_MAX: the kernel drops larger frames
_REPLY_MAX = 4 * 1024 * 1024     # CB_FRAME_REPLY_MAX: done, error and *_reply frames
_REPLIES = frozenset(("done", "error", "complete_reply", "inspect_reply"))
_BAD_REQUEST_TEXT_MAX = 200          # characters of an unusable frame's error quoted back
_CUT_TEXT_MAX = 64 * 1024            # characters of a text a reply over _REPLY_MAX keeps (_fit)
_CUT_MATCHES_MAX = 500               # ... of its completions (up to a text's length each)
_CUT_MATCH_MAX = 1024


def _json_default(o):
    if isinstance(o, (bytes, bytearray)):
        binascii = _std("binascii")
        return binascii.b2a_base64(bytes(o), newline=False).decode("ascii")
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def _nan_constant(name):
    raise ValueError("invalid constant " + name)


try:
    import _json

    class _DecodeCtx:
        strict = False
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = staticmethod(_nan_constant)
        memo = {}

    _scan = _json.make_scanner(_DecodeCtx)
    _encode = _json.make_encoder(None, _json_default, _json.encode_basestring,
                                 None, ":", ",", False, True, False)

    def _loads(s):
        obj, end = _scan(s, 0)
        return obj

    def _dumps(obj):
        return "".join(_encode(obj, 0))
except Exception:                                    # pragma: no cover
    import json as _jsonmod

    def _loads(s):
        return _jsonmod.loads(s)

    def _dumps(obj):
        return _jsonmod.dumps(obj, default=_json_default, allow_nan=False,
                              ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------- frames


def _flush():
    for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            s.flush()
        except Exception:
            pass


def _die():
    _flush()
    os._exit(0)


# Frames whose position relative to stdout/stderr matters.  After writing one
# the runner waits for the kernel's {"type":"ack"}, sent once the kernel has
# drained the pipes and published the frame: without it, output printed right
# after a display could be drained (and published) before the display.
_ACKED = frozenset(("display", "update_display", "execute_result", "clear_output", "error",
                    "started", "comm_open", "comm_msg", "comm_close", "snapshot_request"))
# An ack frame is tiny: only frames shorter than this are decoded to look for one
_ACK_FRAME_MAX = 64
# A sender whose ack another thread is reading checks again at least this often
_ACK_POLL_S = 0.05

# Reading fd 3.  One thread at a time reads (_S.rlock, reentrant): the main
# thread for requests, or the thread that waits for the ack of its frame
# (a widget updated by a background thread, while the main thread runs a
# cell or sits idle waiting for a request).  Whoever reads moves every ack
# out of the read buffer into _S.acks and wakes the sender waiting for it;
# other frames stay buffered, in order, for the main thread.  Senders are
# serialised by _S.lock, so at most one ack is awaited at any time.


def _is_ack(body):
    if len(body) >= _ACK_FRAME_MAX or b'"ack"' not in body:
        return False
    obj, _ = _decode(body)
    return obj is not None and obj.get("type") == "ack"


def _got_acks(n):
    _S.acks += n
    waiter = _S.ack_waiter
    if waiter is not None:
        try:
            waiter.release()
        except RuntimeError:            # not waiting (any more)
            pass


def _extract_acks():
    """Move the complete ack frames out of the read buffer (rlock held)."""
    buf = _S.rbuf
    off = start = found = 0
    keep = []
    while len(buf) - off >= 4:
        n = int.from_bytes(buf[off:off + 4], "big")
        if n == 0 or n > _FRAME_MAX or len(buf) - off - 4 < n:
            break                       # incomplete, or broken (_recv reports it)
        if _is_ack(buf[off + 4:off + 4 + n]):
            keep.append(buf[start:off])
            start = off + 4 + n
            found += 1
        off += 4 + n
    if found:
        keep.append(buf[start:])
        _S.rbuf = b"".join(keep)
        _got_acks(found)


def _wait_ack():
    """Wait for the kernel's ack of the frame just written (_S.lock held)."""
    me = None
    while _S.acks <= 0:
        if _S.rlock.acquire(False):
            try:
                _extract_acks()
                if _S.acks <= 0:
                    _fill()
                    _extract_acks()
            finally:
                _S.rlock.release()
            continue
        # another thread reads (the main one, waiting for a request): it
        # hands the ack over through `me`
        if me is None:
            me = _thread.allocate_lock()
            me.acquire()
        _S.ack_waiter = me
        try:
            if _S.acks <= 0:
                me.acquire(True, _ACK_POLL_S)
        finally:
            _S.ack_waiter = None
    _S.acks -= 1


def _fill():
    """Append what the socket has to the read buffer (rlock held); EOF ends
    the runner."""
    try:
        data = os.read(_FD, 1 << 16)
    except OSError:
        data = b""
    if not data:
        _die()
    _S.rbuf += data


def _defer(obj):
    """Send a frame at the next safe point: for code that may run inside a
    frame being written (a comm closed by the garbage collector)."""
    _S.deferred.append(dict(obj, seq=_S.seq) if "seq" not in obj else obj)


def _send_deferred():
    while _S.deferred:
        try:
            obj = _S.deferred.pop(0)
        except IndexError:              # another thread took it
            break
        _write(obj)


def _send(obj):
    """Write one frame.  Flushes stdout/stderr first (ordering rule).  Every
    frame carries the sequence number of the request it belongs to."""
    if _S.deferred:
        _send_deferred()
    _write(obj)


def _write(obj):
    if "seq" not in obj and obj.get("type") != "hello":
        obj = dict(obj, seq=_S.seq)
    try:
        data = _dumps(obj).encode("utf-8", "replace")
    except ValueError:                                       # NaN, ...
        json = _std("json")
        data = json.dumps(json.loads(json.dumps(obj, default=_json_default),
                                     parse_constant=lambda c: None),
                          ensure_ascii=False).encode("utf-8", "replace")
    limit = _REPLY_MAX if obj.get("type") in _REPLIES else _FRAME_MAX
    if len(data) > limit:
        fit = _fit(obj)
        note = "cellblock: a %s output of %d bytes is over the %d-byte limit and was %s\n" % (
            obj.get("type"), len(data), limit, "dropped" if fit is None else "cut")
        try:
            sys.stderr.write(note)
        except Exception:
            pass
        obj = fit
        if obj is None:
            _flush()
            return
        data = _dumps(obj).encode("utf-8", "replace")
    frame = len(data).to_bytes(4, "big") + data
    _flush()
    with _S.lock:
        acked = obj.get("type") in _ACKED
        if acked:
            _S.acks = 0                 # none can be for this frame yet
        view = memoryview(frame)
        try:
            while view:
                n = os.write(_FD, view)
                view = view[n:]
        except OSError:
            _die()
        if acked:
            _wait_ack()


def _cut(text):
    if isinstance(text, str) and len(text) > _CUT_TEXT_MAX:
        return text[:_CUT_TEXT_MAX] + " [... cut: over the reply's limit]"
    return text


def _fit(obj):
    """A reply over _REPLY_MAX without what can be large, or None for a frame
    that is dropped (an output).  The kernel drops a reply over the limit and
    its request then waits: a done for the cell's wall-time limit, a complete
    or inspect reply for the kernel's assist deadline."""
    kind = obj.get("type")
    if kind == "done":
        obj = dict(obj, user_expressions={}, payload=[], traceback=[])
        for key in ("ename", "evalue"):
            if key in obj:
                obj[key] = _cut(obj[key])
        return obj
    if kind == "inspect_reply":
        data = obj.get("data")
        text = _cut(data.get("text/plain")) if isinstance(data, dict) else None
        return dict(obj, data={"text/plain": text} if isinstance(text, str) else {}, metadata={})
    if kind == "complete_reply":
        matches = obj.get("matches")
        matches = matches if isinstance(matches, list) else []
        return dict(obj, matches=[m for m in matches if isinstance(m, str)
                                  and len(m) <= _CUT_MATCH_MAX][:_CUT_MATCHES_MAX], metadata={})
    return None


def _bad_request(error, seq=None):
    """Tell the kernel that a frame it sent could not be used (never drop one
    silently): the kernel ends the request in flight with an error reply."""
    msg = {"type": "bad_request", "error": error[:_BAD_REQUEST_TEXT_MAX]}
    if isinstance(seq, int):
        msg["seq"] = seq
    _send(msg)


def _decode(body):
    """A frame body -> (dict, None), or (None, why it cannot be used)."""
    try:
        obj = _loads(body.decode("utf-8", "replace"))
    except RecursionError:
        obj, why = None, "frame nested too deeply to decode (RecursionError)"
    except BaseException as e:          # bad JSON, MemoryError
        obj, why = None, "frame is not valid JSON (%s: %s)" % (type(e).__name__, e)
    else:
        why = "frame is not a JSON object"
    if isinstance(obj, dict) and isinstance(obj.get("type"), str):
        return obj, None
    if isinstance(obj, dict):
        why = "frame has no string member 'type'"
    return None, why


def _next_frame(interruptible):
    """The first complete frame of the read buffer that is not an ack (acks
    are counted for their sender), decoded; None when there is none (rlock
    held)."""
    while True:
        buf = _S.rbuf
        if len(buf) < 4:
            return None
        n = int.from_bytes(buf[:4], "big")
        if n > _FRAME_MAX or n == 0:
            # the stream cannot be re-synchronised: say why, then end
            _bad_request("frame length %d is outside 1..%d" % (n, _FRAME_MAX))
            _die()
        if len(buf) < 4 + n:
            return None
        _S.rbuf = buf[4 + n:]
        obj, why = _decode(buf[4:4 + n])
        if obj is not None:
            if obj.get("type") == "ack" and n < _ACK_FRAME_MAX:
                _got_acks(1)            # a background thread's frame
                continue
            return obj
        if interruptible:
            return {"type": "input_reply", "error": "the kernel's reply could not be read: " + why}
        _bad_request(why)


def _recv(interruptible=False):
    """Read one frame (a dict).  EOF ends the runner.

    interruptible: SIGINT raises KeyboardInterrupt while blocked (input wait);
    it can only land while nothing has been consumed from the socket.

    A frame that cannot be used is answered with bad_request (in place of
    the reply the kernel waits for); during an input wait it becomes an
    input_reply error instead, so that input() fails with the reason and the
    cell ends with its own done.
    """
    while True:
        with _S.rlock:
            obj = _next_frame(interruptible)
            if obj is not None:
                return obj
            if not interruptible:
                _fill()
                continue
        # wait outside the lock, where SIGINT can raise; another thread may
        # read fd 3 meanwhile (and buffer our reply): look again soon
        select = _std("select")
        _S.sigmode = _SIG_INPUT
        try:
            if _S.pending:              # it landed in the runner's code above: raise it now
                _S.pending = False
                raise KeyboardInterrupt
            ready = select.select([_FD], [], [], _ACK_POLL_S)[0]
        finally:
            _S.sigmode = _SIG_USER
        if ready:
            with _S.rlock:
                if select.select([_FD], [], [], 0)[0]:
                    _fill()
