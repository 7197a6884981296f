"""The host's name policy for names that come from the sandbox, as in
isolate/names.c (both are tested against tests/unit/names_vectors.json).

A name a cell picks is refused, with a reason, when it is empty, longer than
255 bytes, '.' or '..', hidden (a leading '.'), holds a '/', is not valid
UTF-8 (overlong forms, surrogates and code points past U+10FFFF included),
or holds a C0 control (U+0000-U+001F), DEL, a C1 control (U+0080-U+009F) or
a bidirectional-text control (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F,
U+061C).  A relative path is checked component by component and as a whole
(not absolute, at most 2048 bytes).  ``escape`` shows a name the way
``ls -b`` does: \\a \\b \\t \\n \\v \\f \\r, \\\\ for a backslash, and \\ooo
for each byte of any other character the policy refuses.
"""

__all__ = ["NameRefused", "check", "check_path", "escape", "NAME_MAX", "PATH_MAX"]

NAME_MAX = 255        # CB_NAMES_NAME_MAX
PATH_MAX = 2048       # CB_NAMES_PATH_MAX
_BIDI = frozenset(list(range(0x202A, 0x202F)) + list(range(0x2066, 0x206A)) + [0x200E, 0x200F, 0x061C])
_CESC = {7: "a", 8: "b", 9: "t", 10: "n", 11: "v", 12: "f", 13: "r"}


class NameRefused(ValueError):
    """A name the host will not use.  ``code`` is the stable verdict ("bidi",
    "c1", "utf8", ...), ``offset`` the byte offset of the problem, ``cp`` the
    code point at fault (or None); str() is the whole sentence."""

    def __init__(self, name, code, offset=0, cp=None):
        self.name, self.code, self.offset, self.cp = name, code, offset, cp
        super().__init__("'%s' %s" % (escape(name), reason(code, offset, cp)))


def _raw(name):
    """The bytes of a name: bytes as they are; a str as UTF-8, with what
    os.fsdecode smuggled in (surrogateescape) or lone surrogates turned back
    into the bytes that stand for them (which the policy then refuses)."""
    if isinstance(name, (bytes, bytearray, memoryview)):
        return bytes(name)
    if not isinstance(name, str):
        raise TypeError("a name is str or bytes, not %s" % type(name).__name__)
    try:
        return name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogatepass")


def _seq(b, i):
    """(length, code point) of the well-formed UTF-8 sequence at b[i:], or
    (0, None) for an ill-formed one."""
    c = b[i]
    if c < 0x80:
        return 1, c
    if 0xC2 <= c <= 0xDF:
        need, cp = 2, c & 0x1F
    elif 0xE0 <= c <= 0xEF:
        need, cp = 3, c & 0x0F
    elif 0xF0 <= c <= 0xF4:
        need, cp = 4, c & 0x07
    else:
        return 0, None
    if len(b) - i < need:
        return 0, None
    for k in range(1, need):
        if b[i + k] & 0xC0 != 0x80:
            return 0, None
        cp = (cp << 6) | (b[i + k] & 0x3F)
    if need == 3 and (cp < 0x800 or 0xD800 <= cp <= 0xDFFF):
        return 0, None
    if need == 4 and not 0x10000 <= cp <= 0x10FFFF:
        return 0, None
    return need, cp


def _refused_cp(cp):
    return cp < 0x20 or 0x7F <= cp <= 0x9F or cp in _BIDI


def _verdict_name(b):
    """(code, offset, cp) of one name's bytes; code "ok" when acceptable."""
    if not b:
        return "empty", 0, None
    if len(b) > NAME_MAX:
        return "too_long", 0, None
    if b in (b".", b".."):
        return "dot", 0, None
    if b[:1] == b".":
        return "hidden", 0, None
    i = 0
    while i < len(b):
        k, cp = _seq(b, i)
        if k == 0:
            return "utf8", i, None
        if cp == 0x2F:
            return "slash", i, None
        if cp < 0x20:
            return "c0", i, cp
        if cp == 0x7F:
            return "del", i, cp
        if 0x80 <= cp <= 0x9F:
            return "c1", i, cp
        if cp in _BIDI:
            return "bidi", i, cp
        i += k
    return "ok", 0, None


def _verdict_path(b):
    if not b:
        return "empty", 0, None
    if len(b) > PATH_MAX:
        return "too_long", 0, None
    if b[:1] == b"/":
        return "absolute", 0, None
    start = 0
    for part in b.split(b"/"):
        code, off, cp = _verdict_name(part)
        if code != "ok":
            return code, start + off, cp
        start += len(part) + 1
    return "ok", 0, None


def verdict(name, path=False):
    """(code, offset, cp) without raising: code is "ok" or the problem."""
    b = _raw(name)
    return _verdict_path(b) if path else _verdict_name(b)


def check(name):
    """Returns name if it is acceptable as one file name, else raises NameRefused."""
    code, off, cp = verdict(name)
    if code != "ok":
        raise NameRefused(name, code, off, cp)
    return name


def check_path(path):
    """Returns path if it is acceptable as a relative path of names, else
    raises NameRefused."""
    code, off, cp = verdict(path, path=True)
    if code != "ok":
        raise NameRefused(path, code, off, cp)
    return path


def reason(code, offset=0, cp=None):
    """The sentence for a verdict, word for word as names.c writes it."""
    if code in ("c0", "del"):
        return "contains U+%04X, a control character" % cp
    if code == "c1":
        return "contains U+%04X, a C1 control character" % cp
    if code == "bidi":
        return ("contains U+%04X, a bidirectional-text control (it can make a name display "
                "as another)" % cp)
    if code == "utf8":
        return "is not valid UTF-8 (at byte %d)" % offset
    return {
        "ok": "is acceptable",
        "empty": "is empty or has an empty path component",
        "too_long": "is too long (at most %d bytes a name, %d a path)" % (NAME_MAX, PATH_MAX),
        "dot": "has a '.' or '..' component",
        "hidden": "is hidden (starts with '.')",
        "slash": "contains '/'",
        "absolute": "is an absolute path",
    }[code]


def escape(name):
    """name (str or bytes) as cellblock shows it: ls -b style escapes for
    everything the policy refuses inside a name, a backslash doubled."""
    b = _raw(name)
    out = []
    i = 0
    while i < len(b):
        k, cp = _seq(b, i)
        if k == 0:
            out.append("\\%03o" % b[i])
            i += 1
            continue
        if _refused_cp(cp):
            if cp in _CESC:
                out.append("\\" + _CESC[cp])
            else:
                out.extend("\\%03o" % x for x in b[i:i + k])
        elif cp == 0x5C:
            out.append("\\\\")
        else:
            out.append(b[i:i + k].decode("utf-8"))
        i += k
    return "".join(out)
