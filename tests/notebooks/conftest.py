"""The notebooks here run through nbclient on cellblock's built kernelspec
and on the stock ipykernel; like tests/integration, the kernelspec comes
from $CELLBLOCK_BUILD (default <repo>/build)."""

import os

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("CELLBLOCK_BUILD") or os.path.join(REPO, "build")
os.environ["CELLBLOCK_BUILD"] = BUILD
KSPEC_ROOT = os.path.join(BUILD, "share", "jupyter")
_jp = os.environ.get("JUPYTER_PATH", "")
if KSPEC_ROOT not in _jp.split(os.pathsep):
    os.environ["JUPYTER_PATH"] = KSPEC_ROOT + (os.pathsep + _jp if _jp else "")
