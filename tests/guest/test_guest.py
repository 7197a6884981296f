"""cellblock on the platform its users have: cgroup v2 alone, Debian's own
kernel, as root and as an ordinary user with and without a delegated subtree.

One guest boot (guest/guestvm.py) runs every suite of tests/guest/suites.py
with pytest inside the guest; their junit XML comes back over the results
share and each suite is one test here, failing with the guest's own report.
Afterwards the guest must hold no cellblock cgroup and no process.
"""
import os
import xml.etree.ElementTree as ET

import pytest

import guestvm
from . import suites

REPO = guestvm.REPO
BUILD = os.path.abspath(guestvm.BUILD)
PYTEST = ["/usr/bin/python3", "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"]
TIME_SCALE = 4                # per-test limits inside the emulated guest (tests/conftest.py)
STEP_TIMEOUT = 1500           # seconds per suite, then the guest kills it


def _steps():
    steps = []
    for s in suites.selected():
        env = {"CELLBLOCK_BUILD": BUILD, "CB_EXPECT_LIMITS": s.expect, "CB_MUST_WORK": "1",
               "CB_TEST_TIME_SCALE": str(TIME_SCALE)}
        env.update(s.env)
        argv = PYTEST + ["--junitxml=/mnt/cbout/%s.xml" % s.name] + \
            [a if a.startswith("-") or not a.startswith("tests/") else os.path.join(REPO, a)
             for a in s.args]
        # cwd: the user's home (the control kernels write into their cwd)
        steps.append(guestvm.Step(argv, user=s.user, cgroup=s.cgroup, env=env,
                                  timeout=STEP_TIMEOUT))
    # what the suites left: every cellblock group gone (a delegated group keeps
    # the leaf its own processes were moved to)
    steps.append(guestvm.Step(["sh", "-c", "find /sys/fs/cgroup -name 'cellblock-*' "
                               "! -name cellblock-leaf"],
                              cwd="/", timeout=60))
    return steps


@pytest.fixture(scope="module")
def guest(guest_ok):
    res = guestvm.Guest().run(_steps())
    if res.error and not res.steps[0].output:
        pytest.fail("the guest did not run its job: %s\n%s" % (res.error, res.console[-3000:]))
    return res


def _junit(text):
    root = ET.fromstring(text)
    ts = root if root.tag == "testsuite" else root.find("testsuite")
    cases = []
    for c in ts.iter("testcase"):
        kind = next((ch.tag for ch in c if ch.tag in ("failure", "error", "skipped")), "passed")
        cases.append(("%s::%s" % (c.get("classname"), c.get("name")), kind))
    return cases


@pytest.mark.timeout(STEP_TIMEOUT * 6)
@pytest.mark.parametrize("suite", suites.selected(), ids=lambda s: s.name)
def test_suite_in_guest(guest, suite):
    n = [s.name for s in suites.selected()].index(suite.name)
    step = guest.steps[n]
    report = "guest suite %s (%s in %s), %.0f s:\n%s" % (
        suite.name, suite.user, step.cgroup, step.seconds, step.output[-6000:])
    assert not step.timed_out, "timed out: " + report
    xml = guest.files.get(suite.name + ".xml")
    assert xml, "no junit XML: " + report
    cases = _junit(xml)
    bad = [c for c, k in cases if k in ("failure", "error")]
    skipped = [c for c, k in cases if k == "skipped"]
    assert not bad, "failed in the guest: %s\n%s" % (bad, report)
    assert step.rc == 0, report
    ran = len(cases) - len(skipped)
    assert ran >= suite.min_tests, "only %d tests ran: %s" % (ran, report)


@pytest.mark.timeout(STEP_TIMEOUT * 6)
def test_guest_left_nothing(guest):
    last = guest.steps[-1]
    assert last.rc == 0 and last.output.strip() == "", \
        "cellblock cgroups left in the guest:\n" + last.output
    assert guest.after.get("processes") == [], guest.after
    left = [g for g in guest.after.get("cgroups", [])
            if "cellblock-" in g and not g.endswith("/cellblock-leaf")]
    assert left == [], left
