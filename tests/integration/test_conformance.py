"""jupyter_kernel_test conformance suite for cellblock, every sample attribute
set.  The samples are the package's IPython-flavoured ones (upstream
test_ipykernel.py): cellblock provides `display`, IPython.display behaviour
and `obj?` help, so the same samples must pass on it and on ipykernel.

Kernel start/stop goes through our helpers so that teardown also checks that
the kernel and its sandbox are gone.
"""

import jupyter_kernel_test as jkt
import pytest

from .helpers import Kernel, kernel_name


@pytest.mark.timeout(300)
class TestCellblockConformance(jkt.KernelTests):
    kernel_name = kernel_name()

    @classmethod
    def setUpClass(cls):
        cls._kernel = Kernel(kernel_name=cls.kernel_name)
        cls._kernel.start()
        cls.km, cls.kc = cls._kernel.km, cls._kernel.kc
        # jupyter_kernel_test's execute_helper reads stdin-less replies
        cls.kc.allow_stdin = False

    @classmethod
    def tearDownClass(cls):
        cls._kernel.stop(check=True)

    language_name = "python"
    file_extension = ".py"

    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"

    completion_samples = [
        {"text": "zi", "matches": {"zip"}},
        {"text": "import o"},  # no "matches": only the reply's shape is validated
    ]

    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples = ["import = 7q"]

    code_page_something = "zip?"
    code_generate_error = "raise"

    code_execute_result = [
        {"code": "1+2+3", "result": "6"},
        {"code": "[n*n for n in range(1, 4)]", "result": "[1, 4, 9]"},
        {"code": "'a' * 3", "result": "'aaa'"},
    ]

    code_display_data = [
        {"code": "from IPython.display import HTML, display; display(HTML('<b>test</b>'))",
         "mime": "text/html"},
        {"code": "from IPython.display import Math, display; display(Math('\\\\frac{1}{2}'))",
         "mime": "text/latex"},
        {"code": "display({'text/html': '<i>raw</i>', 'text/plain': 'raw'}, raw=True)",
         "mime": "text/html"},
    ]

    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "range", "search")

    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output; clear_output()"
