"""cellblock runner: completion, inspection, is_complete and `obj?` help.

Loaded on first use by runner.py.  Positions are Python str indices, i.e.
Unicode code points, as the Jupyter protocol (5.2+) wants.  Completion only
evaluates plain dotted names found in the user's globals or builtins (name
lookups and getattr, never calls).
"""

import sys
import os
import builtins
import keyword

_runner = sys.modules["_cellblock_runner"]


def _is_ident_char(c):
    return c == "_" or c.isalnum()


def _dotted_before(code, pos):
    """Start index of the dotted name that ends at pos."""
    i = pos
    while i > 0 and (_is_ident_char(code[i - 1]) or code[i - 1] == "."):
        i -= 1
    # a name cannot start with a digit; numbers like 1.5 are not names
    while i < pos and code[i].isdigit():
        return pos, ""
    return i, code[i:pos]


_MISSING = object()


def resolve(dotted, glob):
    """Look up a plain dotted name (a.b.c) in glob/builtins via getattr only."""
    parts = dotted.split(".")
    if not parts or not all(p.isidentifier() for p in parts):
        return _MISSING
    head = parts[0]
    if head in glob:
        obj = glob[head]
    elif hasattr(builtins, head):
        obj = getattr(builtins, head)
    elif head in sys.modules and len(parts) > 1:
        obj = sys.modules[head]
    else:
        return _MISSING
    for p in parts[1:]:
        try:
            obj = getattr(obj, p)
        except Exception:
            return _MISSING
    return obj


def _sort_key(name):
    bare = name.lstrip("_")
    return (len(name) - len(bare) if name.startswith("_") else 0, bare.lower(), name)


# ------------------------------------------------------------------ modules

_top_modules = None


def _all_top_modules():
    global _top_modules
    if _top_modules is None:
        import pkgutil
        names = set(sys.builtin_module_names)
        try:
            for info in pkgutil.iter_modules():
                names.add(info.name)
        except Exception:
            pass
        names.update(n for n in sys.modules if "." not in n and not n.startswith("_cellblock"))
        _top_modules = sorted(names)
    return _top_modules


def _submodules(package):
    """Names of the submodules of a dotted package, without importing it."""
    import importlib.machinery
    import pkgutil
    mod = sys.modules.get(package)
    locs = getattr(mod, "__path__", None) if mod is not None else None
    if locs is None:
        locs = None
        name = ""
        for part in package.split("."):
            name = part if not name else name + "." + part
            try:
                spec = importlib.machinery.PathFinder.find_spec(name, locs)
            except Exception:
                spec = None
            if spec is None or not spec.submodule_search_locations:
                return []
            locs = list(spec.submodule_search_locations)
    try:
        return [i.name for i in pkgutil.iter_modules(list(locs))]
    except Exception:
        return []


def _complete_import(line):
    """Module-name completion for import lines; None when not an import line."""
    s = line.lstrip()
    words = s.split()
    if s.startswith("import ") and "(" not in s:
        part = s[len("import "):].split(",")[-1].strip()
        if " as " in part or part.endswith(" as"):
            return None
        return _module_matches(part)
    if s.startswith("from "):
        if len(words) == 1 or (len(words) == 2 and not s.endswith(" ")):
            part = words[1] if len(words) == 2 else ""
            return _module_matches(part)
        if len(words) == 2 and s.endswith(" "):
            return None
        if len(words) >= 3 and words[2] == "import":
            pkg = words[1]
            after = s.split(" import ", 1)[1] if " import " in s else ""
            part = after.split(",")[-1].strip().lstrip("(").strip()
            names = set(_submodules(pkg))
            mod = sys.modules.get(pkg)
            if mod is not None:
                names.update(n for n in dir(mod))
            return part, sorted((n for n in names if n.startswith(part)), key=_sort_key)
    return None


def _module_matches(part):
    if "." in part:
        pkg, _, prefix = part.rpartition(".")
        subs = _submodules(pkg)
        return part, sorted((pkg + "." + n for n in subs if n.startswith(prefix)), key=_sort_key)
    return part, [n for n in _all_top_modules() if n.startswith(part)]


# ------------------------------------------------------------------ complete


def complete(code, pos, glob):
    """-> (matches, cursor_start, cursor_end)."""
    before = code[:pos]
    line = before.rsplit("\n", 1)[-1]
    imp = _complete_import(line)
    if imp is not None:
        part, matches = imp
        return matches, pos - len(part), pos
    # dict keys: d["ab|
    k = _complete_dict_key(before, glob)
    if k is not None:
        return k[0], k[1], pos
    start, text = _dotted_before(code, pos)
    if text == "" and start == pos and pos > 0 and code[pos - 1].isdigit():
        return [], pos, pos
    if "." in text:
        head, _, prefix = text.rpartition(".")
        obj = resolve(head, glob)
        if obj is _MISSING:
            return [], pos, pos
        try:
            names = dir(obj)
        except Exception:
            names = []
        if not prefix.startswith("_"):
            names = [n for n in names if not n.startswith("_")]
        matches = sorted({head + "." + n for n in names if n.startswith(prefix)}, key=_sort_key)
        return matches, start, pos
    prefix = text
    if prefix == "" and not (pos == 0 or code[pos - 1] in " \t\n([{,=:;+-*/%<>!~&|^@"):
        return [], pos, pos
    names = set(glob)
    names.update(dir(builtins))
    names.update(keyword.kwlist)
    names.update(getattr(keyword, "softkwlist", ()))
    if not prefix.startswith("_"):
        names = {n for n in names if not n.startswith("_")}
    matches = sorted((n for n in names if n.startswith(prefix) and isinstance(n, str)),
                     key=_sort_key)
    return matches, start, pos


def _complete_dict_key(before, glob):
    """d["ab| or d['ab| -> (matches, start) for str keys of a dict in globals."""
    q = max(before.rfind('"'), before.rfind("'"))
    if q < 2 or before[q - 1] != "[":
        return None
    quote = before[q]
    part = before[q + 1:]
    if quote in part or "\n" in part:
        return None
    start, name = _dotted_before(before, q - 1)
    if not name:
        return None
    obj = resolve(name, glob)
    if not isinstance(obj, dict):
        return None
    keys = [k for k in obj if isinstance(k, str) and k.startswith(part)]
    return sorted(keys, key=_sort_key), q + 1


# ------------------------------------------------------------------ inspect


def _name_at(code, pos):
    """The dotted name under/before the cursor, or the callee of an open '('."""
    end = pos
    while end < len(code) and _is_ident_char(code[end]):
        end += 1
    start, text = _dotted_before(code, end)
    text = text.strip(".")
    if text:
        return text
    # inside a call: find the innermost unclosed '('
    depth = 0
    i = pos - 1
    while i >= 0:
        c = code[i]
        if c in ")]}":
            depth += 1
        elif c in "([{":
            if depth == 0:
                if c == "(":
                    s, t = _dotted_before(code, i)
                    return t.strip(".")
                return ""
            depth -= 1
        i -= 1
    return ""


def _signature(obj):
    import inspect
    try:
        return str(inspect.signature(obj))
    except Exception:
        return None


def info_text(obj, name, detail):
    """Text like IPython's pinfo (obj?) and pinfo2 (obj??)."""
    import inspect
    out = []
    sig = None
    if callable(obj):
        sig = _signature(obj)
    if isinstance(obj, type):
        if sig is not None:
            out.append("Init signature: " + name + sig)
    elif sig is not None:
        out.append("Signature: " + name + sig)
    source = None
    if detail:
        try:
            source = inspect.getsource(obj)
        except Exception:
            source = None
    if source is not None:
        out.append("Source:\n" + source.rstrip("\n"))
    else:
        if not callable(obj) or isinstance(obj, (int, float, str, bytes, list, dict, tuple, set)):
            try:
                r = repr(obj)
            except Exception:
                r = "<unprintable>"
            if len(r) > 200:
                r = r[:200] + "..."
            out.append("String form: " + r)
            try:
                out.append("Length: %d" % len(obj))
            except Exception:
                pass
        doc = None
        try:
            doc = inspect.getdoc(obj)
        except Exception:
            pass
        if doc and not (isinstance(obj, (int, float, str, bytes, list, dict, tuple, set, bool))):
            out.append("Docstring:\n" + doc)
        elif not doc:
            out.append("Docstring: <no docstring>")
    try:
        f = inspect.getsourcefile(obj) or inspect.getfile(obj)
        if f and not f.startswith("<"):
            out.append("File:      " + f)
    except Exception:
        pass
    out.append("Type:      " + type(obj).__name__)
    if isinstance(obj, type):
        try:
            subs = obj.__subclasses__()
            if subs:
                out.append("Subclasses: " + ", ".join(s.__name__ for s in subs[:20]))
        except Exception:
            pass
    return "\n".join(out)


def inspect(code, pos, detail, glob):
    """-> mimebundle or None."""
    name = _name_at(code, pos)
    if not name:
        return None
    obj = resolve(name, glob)
    if obj is _MISSING:
        return None
    return {"text/plain": info_text(obj, name, detail)}


def page(name, detail, glob):
    """Help text for `name?` / `name??` -> text or None when not found."""
    obj = resolve(name, glob)
    if obj is _MISSING:
        return None
    return info_text(obj, name, detail)


# ------------------------------------------------------------------ is_complete


def _last_indent(lines):
    """Indent of the last line, as IPython's find_last_indent computes it."""
    import re
    if not lines:
        return 0
    m = re.match(r"^[ \t]*", lines[-1].replace("\t", " " * 4))
    return len(m.group(0)) if m else 0


def is_complete(code):
    """-> (status, indent), the way IPython's TransformerManager.check_complete
    answers: tokens decide (an open bracket, string or a line ending in ':' or
    '\\' means incomplete), then the real parser; a block whose last line is
    still indented is complete only once a newline ends it.  A continuation
    line inside brackets (``x = [1,\n 2]``) is not an open block."""
    import codeop
    import io
    import tokenize
    import warnings
    src = code
    try:
        magics = _runner._mod("cb_magics")
        src = magics.transform(code, check=True)
    except Exception:
        pass
    ends_with_newline = False
    for ch in reversed(src):
        if ch == "\n":
            ends_with_newline = True
            break
        if ch.strip():
            break
    if not ends_with_newline:
        src += "\n"
    lines = src.splitlines(keepends=True)
    if not lines or not src.strip():
        return "complete", None
    while lines and not lines[0].strip():      # IPython's leading_empty_lines
        lines.pop(0)
    ind = lines[0][:len(lines[0]) - len(lines[0].lstrip())]
    if ind:                                      # ... and leading_indent
        lines = [ln[len(ind):] if ln.startswith(ind) else ln for ln in lines]
    if lines[-1].rstrip("\n").endswith("\\"):
        return "incomplete", " " * _last_indent(lines)
    if lines[0].startswith("%%"):
        return ("incomplete", " " * _last_indent(lines)) if lines[-1].strip() \
            else ("complete", None)
    try:
        toks = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # an open bracket or string at the end of the input
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                codeop.compile_command("".join(lines), "<input>", "exec")
        except (SyntaxError, OverflowError, ValueError, TypeError, MemoryError):
            return "invalid", None
        return "incomplete", " " * _last_indent(lines)
    skip = {tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER,
            tokenize.DEDENT, tokenize.INDENT}
    significant = [t for t in toks if t.type not in skip]
    if significant and significant[-1].string == ":" and \
            significant[-1].start[0] == max(t.start[0] for t in significant):
        return "incomplete", " " * (_last_indent(lines) + 4)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", SyntaxWarning)
            res = codeop.compile_command("".join(lines), "<input>", "exec")
    except (SyntaxError, OverflowError, ValueError, TypeError, MemoryError, SyntaxWarning):
        return "invalid", None
    if res is None:
        return "incomplete", " " * _last_indent(lines)
    ends_block = any(t.type == tokenize.DEDENT for t in toks[-3:]) and \
        _last_indent([ln for ln in lines if ln.strip()][-1:]) > 0
    if ends_block and not ends_with_newline:
        return "incomplete", " " * _last_indent(lines)
    return "complete", None
    lines = src.split("\n")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = codeop.compile_command(src, "<input>", "exec")
    except (SyntaxError, OverflowError, ValueError):
        return "invalid", None
    last = lines[-1]
    nonblank = [l for l in lines if l.strip()]
    prev = nonblank[-1] if nonblank else ""
    indent = prev[:len(prev) - len(prev.lstrip())]
    if prev.rstrip().endswith(":"):
        indent += "    "
    if res is None:
        return "incomplete", indent
    # a block that was not closed by a blank line stays open (like IPython)
    if last.strip() and last[:1] in (" ", "\t"):
        return "incomplete", indent
    if src.rstrip("\n") != src and len(nonblank) and nonblank[-1][:1] in (" ", "\t") \
            and not src.endswith("\n\n") and lines[-1] == "":
        return "incomplete", indent
    return "complete", None
