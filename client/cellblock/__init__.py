"""cellblock client: run code in a cellblock sandbox from Python, with the
API of the code-interpreter SDKs agents already use (E2B's
``Sandbox().run_code(...)``).  Switching an agent over is two lines:

    from cellblock import Sandbox          # was: from e2b_code_interpreter import Sandbox
    sb = Sandbox(memory=512, timeout=60)   # was: Sandbox()

Standard library + jupyter_client only.
"""

from . import names
from .files import Filesystem
from .models import EntryInfo, Execution, ExecutionError, Logs, OutputMessage, Result
from .names import NameRefused
from .sandbox import Sandbox, SandboxError
from .snapshots import Checkpoint, Rollback, SnapshotError

__version__ = "0.1.0"
__all__ = ["Sandbox", "SandboxError", "Execution", "Result", "Logs", "ExecutionError",
           "OutputMessage", "EntryInfo", "Filesystem", "NameRefused", "names", "Checkpoint",
           "Rollback", "SnapshotError"]
