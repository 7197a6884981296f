#!/usr/bin/env python3
"""Run examples/demo.ipynb through the cellblock kernel (`make demo`).

Executes the notebook with nbclient on the kernelspec built by `make`
(<repo>/build/share/jupyter/kernels/cellblock, or $CELLBLOCK_BUILD), writes

    build/demo/demo.executed.ipynb      the executed notebook
    build/demo/artifacts/<path>         every file a cell wrote and cellblock
                                        returned as an artifact

and prints one line per output of each cell.

Usage: python3 examples/demo.py [NOTEBOOK] [--out DIR] [--timeout SECONDS]
"""

import argparse
import base64
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(REPO, "build")
KSPEC_ROOT = os.path.join(BUILD, "share", "jupyter")

# Before jupyter_client is imported: the kernelspec must be found.
_jp = os.environ.get("JUPYTER_PATH", "")
if KSPEC_ROOT not in _jp.split(os.pathsep):
    os.environ["JUPYTER_PATH"] = KSPEC_ROOT + (os.pathsep + _jp if _jp else "")

try:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
except ImportError as e:  # the pyenv python3 on PATH has no Jupyter
    sys.exit(f"demo.py: {e}; run it with /usr/bin/python3 (Debian's python3-nbclient), "
             "or `make demo`")

# The host's name policy for names from the sandbox (the client's copy of
# isolate/names.c): artifact paths are checked and shown escaped with it.
sys.path.insert(0, os.path.join(REPO, "client"))
from cellblock import names  # noqa: E402

# Mime types whose value is base64 text in a notebook.
BINARY_PREFIXES = ("image/png", "image/jpeg", "image/gif", "image/webp",
                   "application/pdf", "application/octet-stream")


def is_binary(mime):
    return mime.startswith(BINARY_PREFIXES)


def safe_join(root, rel):
    """root/rel for a path the sandbox named: names.NameRefused (a ValueError)
    for an absolute path, '..', a control or bidi character, ..."""
    return os.path.join(root, *names.check_path(rel).split("/"))


def artifact_of(output):
    md = output.get("metadata") or {}
    art = (md.get("cellblock") or {}).get("artifact")
    return art if isinstance(art, dict) and art.get("path") else None


def save_artifact(output, art, root):
    """Write the artifact's content to root/<path>; returns (file, bytes written)."""
    data = output.get("data") or {}
    mime = art.get("mime")
    if mime not in data:  # fall back to the first non-text/plain mime
        mime = next((m for m in data if m != "text/plain"), "text/plain")
    value = data[mime]
    if is_binary(mime):
        content = base64.b64decode(value if isinstance(value, str) else "".join(value))
    elif isinstance(value, (dict, list)) and mime.endswith("json"):
        content = json.dumps(value, indent=1).encode()
    else:
        content = (value if isinstance(value, str) else "".join(value)).encode("utf-8")
    dest = safe_join(root, art["path"])
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "wb") as f:
        f.write(content)
    return dest, len(content)


def show(path):
    """A path as the user will want to see it: relative when under the cwd."""
    path = os.path.abspath(path)
    cwd = os.getcwd()
    if cwd == "/" or not path.startswith(cwd.rstrip("/") + "/"):
        return path
    return os.path.relpath(path, cwd)


def one_line(text, width=70):
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def describe(output):
    """One human line for one output."""
    kind = output.get("output_type")
    if kind == "stream":
        return f"{output['name']}: {one_line(output['text'])}"
    if kind == "error":
        return f"error: {output['ename']}: {one_line(output['evalue'])}"
    data = output.get("data") or {}
    art = artifact_of(output)
    if art:
        return f"artifact: {names.escape(art['path'])} ({art.get('mime')}, {art.get('size')} bytes)"
    if "image/png" in data:
        size = len(base64.b64decode(data["image/png"]))
        label = "result" if kind == "execute_result" else "display"
        return f"{label}: image/png ({size} bytes)"
    rich = [m for m in data if m != "text/plain"]
    label = "result" if kind == "execute_result" else "display"
    plain = one_line(data.get("text/plain", ""), 50)
    if rich:
        return f"{label}: {', '.join(rich)} + text/plain {plain!r}"
    return f"{label}: {plain}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", nargs="?", default=os.path.join(HERE, "demo.ipynb"))
    ap.add_argument("--out", default=os.path.join(BUILD, "demo"))
    ap.add_argument("--timeout", type=int, default=120, help="per cell (seconds)")
    ap.add_argument("--kernel", default="cellblock")
    args = ap.parse_args(argv)

    kspec = os.path.join(KSPEC_ROOT, "kernels", args.kernel, "kernel.json")
    if args.kernel == "cellblock" and not os.path.exists(kspec):
        sys.exit(f"demo.py: {kspec} not found: run `make` first")

    nb = nbformat.read(args.notebook, as_version=4)
    client = NotebookClient(nb, kernel_name=args.kernel, timeout=args.timeout,
                            startup_timeout=60, allow_errors=False,
                            resources={"metadata": {"path": HERE}})
    t0 = time.monotonic()
    print(f"running {show(args.notebook)} on the '{args.kernel}' kernel ...")
    failed = None
    try:
        client.execute()
    except CellExecutionError as e:
        failed = e
    elapsed = time.monotonic() - t0

    os.makedirs(args.out, exist_ok=True)
    stem = os.path.splitext(os.path.basename(args.notebook))[0]
    executed = os.path.join(args.out, f"{stem}.executed.ipynb")
    nbformat.write(nb, executed)

    art_root = os.path.join(args.out, "artifacts")
    saved = []
    for i, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            first = one_line(cell.source.splitlines()[0] if cell.source else "", 60)
            print(f"[{i}] {cell.cell_type}: {first}")
            continue
        count = cell.get("execution_count")
        head = one_line(cell.source.splitlines()[0] if cell.source else "", 50)
        print(f"[{i}] In [{count}]: {head}")
        if not cell.outputs:
            print("      (no output)")
        for out in cell.outputs:
            print(f"      {describe(out)}")
            art = artifact_of(out)
            if art:
                try:
                    dest, n = save_artifact(out, art, art_root)
                except ValueError as e:
                    print(f"      not saved: {e}")
                    continue
                saved.append((dest, n))

    print(f"\nexecuted in {elapsed:.1f} s")
    print(f"executed notebook: {show(executed)}")
    if saved:
        print(f"artifacts ({len(saved)}) saved under {show(art_root)}/:")
        for dest, n in saved:
            print(f"  {names.escape(show(dest))} ({n} bytes)")
    else:
        print("no artifacts")
    if failed is not None:
        print(f"\nthe notebook stopped on an error:\n{failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
