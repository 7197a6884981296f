"""Fixtures of the guest suites (tests/guest/README section in guest/README.md):
the test guest is booted once per module and its results shared."""
import os
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "guest"))

import guestvm  # noqa: E402

MUST_WORK = os.environ.get("CB_MUST_WORK") == "1"


def skip_or_fail(reason):
    if MUST_WORK:
        pytest.fail("skip not allowed (CB_MUST_WORK=1): " + reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def guest_ok():
    ok, why = guestvm.available()
    if not ok:
        skip_or_fail(why)
    return True
