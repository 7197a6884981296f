"""cellblock runner, IPython shell: the magics ipykernel adds to IPython's.

%clear, %less/%more/%pager, %edit (refused: no editor), %connect_info,
%qtconsole and %autosave answer as under ipykernel, in the sandbox's terms.
Loaded by cb_shell.
"""

import sys
import os

_runner = sys.modules["_cellblock_runner"]

from IPython.core import page  # noqa: E402
from IPython.core.error import UsageError  # noqa: E402
from IPython.core.magic import Magics, line_magic, magics_class  # noqa: E402


@magics_class
class KernelMagics(Magics):
    """The magics ipykernel's ZMQInteractiveShell adds, and %pip saying why
    an install failed in the sandbox."""

    @line_magic
    def pip(self, line):
        """Run the pip package manager within the current kernel.

        Usage:
          %pip install [pkgs]

        In cellblock's sandbox there is no network unless the kernel was
        started with --network host, and a system Python (PEP 668) refuses
        installs; a failed install says which.
        """
        import shlex
        self.shell.system(" ".join([shlex.quote(sys.executable), "-m", "pip", line]))
        rc = self.shell.user_ns.get("_exit_code")
        if rc:
            note = _runner._mod("cb_magics").pip_failure_note(line, rc)
            if note:
                print(note, file=sys.stderr)
        print("Note: you may need to restart the kernel to use updated packages.")

    @line_magic
    def checkpoint(self, line):
        """Save the session (variables, imports, the files of the home and /tmp)
        as it is when this cell ends.

        Usage:
          %checkpoint [NAME]    (NAME: letters, digits, '.', '_', '-'; default In-N)
          %checkpoint -d NAME   forget it

        The kernel takes it and prints the outcome (docs/SNAPSHOTS.md)."""
        _runner._mod("cb_snap").magic("checkpoint", line, UsageError)

    @line_magic
    def rollback(self, line):
        """Go back to a checkpoint when this cell ends: %rollback NAME.

        Threads and processes started since are not brought back."""
        _runner._mod("cb_snap").magic("rollback", line, UsageError)

    @line_magic
    def checkpoints(self, line):
        """List the session's checkpoints (the kernel's record of them)."""
        _runner._mod("cb_snap").magic("checkpoints", line, UsageError)

    @line_magic
    def autosave(self, arg_s):
        """Set the autosave interval in the notebook (in seconds).

        The default value is 120, or two minutes.
        ``%autosave 0`` will disable autosave.
        """
        from IPython.display import Javascript, display
        try:
            interval = int(arg_s)
        except ValueError as e:
            raise UsageError("%%autosave requires an integer, got %r" % arg_s) from e
        display(Javascript("IPython.notebook.set_autosave_interval(%i)" % (1000 * interval)),
                include=["application/javascript"])
        print("Autosaving every %i seconds" % interval if interval else "Autosave disabled")

    @line_magic
    def less(self, arg_s):
        """Show a file through the pager.

        Files ending in .py are syntax-highlighted."""
        if not arg_s:
            raise UsageError("Missing filename.")
        if arg_s.endswith(".py"):
            from IPython.utils import openpy
            cont = self.shell.pycolorize(openpy.read_py_file(arg_s, skip_encoding_cookie=False))
        else:
            with open(arg_s) as f:
                cont = f.read()
        page.page(cont)

    more = line_magic("more")(less)

    @line_magic
    def man(self, arg_s):
        """Find the man page for the given command and display in pager."""
        page.page(self.shell.getoutput("man %s | col -b" % arg_s, split=False))

    @line_magic
    def clear(self, arg_s):
        """Clear the terminal."""
        self.shell.system("clear")

    @line_magic
    def edit(self, parameter_s="", last_call=None):
        """Ask the frontend to open a file in its editor (edit_magic payload).

        %edit [-n N] [-p] [-r] target: as ipykernel's %edit."""
        from IPython.core.magics import CodeMagics, MacroToEdit
        last_call = last_call or ["", ""]
        opts, args = self.parse_options(parameter_s, "prn:")
        try:
            filename, lineno, _ = CodeMagics._find_edit_target(self.shell, args, opts, last_call)
        except MacroToEdit:
            print("Macro editing not yet implemented in 2-process model.")
            return
        self.shell.payload_manager.write_payload(
            {"source": "edit_magic", "filename": os.path.abspath(filename),
             "line_number": lineno})

    @line_magic
    def connect_info(self, arg_s):
        """Print information for connecting other clients to this kernel."""
        import warnings
        warnings.warn("Could not get connection info: %r" % (
            RuntimeError("the sandbox never sees the kernel's connection file"),))

    @line_magic
    def qtconsole(self, arg_s):
        """Open a qtconsole connected to this kernel."""
        import warnings
        warnings.warn("Could not start qtconsole: %r" % (
            RuntimeError("the sandbox has no display"),))
