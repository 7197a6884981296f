import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from .rclient import Runner  # noqa: E402


@pytest.fixture
def runner(tmp_path):
    r = Runner(cwd=str(tmp_path))
    yield r
    r.close()


@pytest.fixture(scope="module")
def shared_runner(tmp_path_factory):
    r = Runner(cwd=str(tmp_path_factory.mktemp("shared")))
    yield r
    r.close()
