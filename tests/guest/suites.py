"""Which of the real tests run in the test guest, as whom and in which cgroup.

The tests are the host's own files (tests/integration/test_limits.py,
tests/security/test_escape.py, tests/security/test_hostile_sandbox.py,
tests/security/test_warm.py, tests/integration/test_network_policy.py, the
gvisor tier's tests/integration/test_tiers.py and snapshot suites), run by
pytest inside the guest against the host's build tree; CB_EXPECT_LIMITS tells
the banner test what this placement must show.  `make test` runs SUBSET (one
boot, about 5 minutes here); `make test-guest` (CB_GUEST_FULL=1) runs FULL.
"""
import os
from dataclasses import dataclass, field

LIMITS = "tests/integration/test_limits.py"
ESCAPE = "tests/security/test_escape.py"
HOSTILE = "tests/security/test_hostile_sandbox.py"
WARM = "tests/security/test_warm.py"
POLICY = "tests/integration/test_network_policy.py"
PAUSABLE = "tests/security/test_pausable.py"
CRIU = PAUSABLE + "::test_criu_dumps_the_runner_of_a_pausable_sandbox_only"
CRIU_LAUNCHER = PAUSABLE + "::test_the_launchers_dump_of_a_parked_copy_leaves_the_session_as_it_was"
CRIU_PAUSE = (PAUSABLE + "::test_a_pausable_session_pauses_resumes_and_forks_with_every_layer_in_"
              "force")
TIERS = "tests/integration/test_tiers.py"
GVISOR_OOM = TIERS + "::test_gvisor_memory_limit_then_fresh_sandbox"
SNAP_PAUSE = "tests/integration/test_snapshots_pause.py"
SNAP_RESUME = "tests/security/test_snapshots_resume.py"
GVISOR_RESUME = SNAP_RESUME + "::test_every_layer_holds_after_a_resume_and_in_each_clone"
BANNER = LIMITS + "::test_banner_says_what_holds_the_limits"
MEMORY = LIMITS + "::test_memory_limit_names_the_cause"
RESOURCES = "memory_limit or pids_limit or cpu_limit or fork_bomb or disk_limit or open_files"


@dataclass
class Suite:
    name: str            # the junit file and the host test's id
    user: str            # root | cbuser
    cgroup: str          # guest/init.py's placement: root | service | service-delegated | ...
    expect: str          # CB_EXPECT_LIMITS: "cgroup v2" or "DEGRADED"
    args: list           # pytest arguments: files, node ids, -k
    min_tests: int       # at least this many must have run (a selection that shrank is a bug)
    env: dict = field(default_factory=dict)


SUBSET = [
    Suite("root", "root", "root", "cgroup v2",
          [BANNER, MEMORY, ESCAPE + "::test_pids_limit",
           HOSTILE + "::test_no_cgroup_left_after_hard_kill[sigkill_kernel]", CRIU, CRIU_LAUNCHER,
           CRIU_PAUSE, GVISOR_OOM, GVISOR_RESUME],
          9,
          {"CB_SECURITY_KERNELS": "cellblock", "CB_CRIU_MUST_WORK": "1"}),
    Suite("delegated", "cbuser", "delegated", "cgroup v2", [BANNER, MEMORY], 2),
    Suite("undelegated", "cbuser", "undelegated", "DEGRADED", [BANNER], 1),
]

FULL = [
    Suite("root", "root", "root", "cgroup v2",
          [LIMITS, ESCAPE, HOSTILE, "-k",
           "not timeout and (banner or memory or max_output or %s or nothing_survives or "
           "cgroup_left or mid_freeze or clone_into)" % RESOURCES], 26),
    Suite("delegated", "cbuser", "delegated", "cgroup v2",
          [LIMITS, ESCAPE, HOSTILE, "-k",
           "not timeout and (banner or memory or %s or nothing_survives or cgroup_left or "
           "clone_into)" % RESOURCES], 18,
          # the controls ran as root above; an emulated ipykernel takes ~40 s to
          # start, past the security fixtures' 60 s under load
          {"CB_SECURITY_KERNELS": "cellblock"}),
    # an ordinary user in a login session (not delegated): DEGRADED, and the
    # rlimits still hold what they can (no CPU quota: test_cpu_limit left out);
    # --memory is the address space, which a cell may use up and the session
    # goes on (runner/cb_memory.py)
    Suite("undelegated", "cbuser", "undelegated", "DEGRADED",
          [LIMITS, ESCAPE, "-k", "banner or memory_limit or pids_limit or fork_bomb"], 5,
          {"CB_SECURITY_KERNELS": "cellblock"}),
    # warm starts (root only): the isolation of sandboxes forked from one
    # template, and the template's own group (memory.max, pids.max on v2).
    # Its first build takes longer than the runner's 30 s hello under TCG,
    # which --warm wait now outlasts (the launcher's "waiting" report)
    Suite("root-warm", "root", "root", "cgroup v2",
          [WARM, "-k", "share_namespaces or see_only_themselves or random_state or "
           "not_reachable or every_layer or landlock_refuses or bounded_and_accounted"], 11),
    # --pausable (issue 20): the sandbox as any other, and criu (Debian's,
    # which works on this kernel) dumps its runner, not an ordinary one's;
    # pause, resume and fork with every layer again; a tampered image refused
    Suite("root-pausable", "root", "root", "cgroup v2", [PAUSABLE], 10,
          {"CB_SECURITY_KERNELS": "cellblock", "CB_CRIU_MUST_WORK": "1"}),
    # the gvisor tier on cgroup v2 (runsc from bookworm-backports, systrap):
    # its limits (an OOM kill seen in memory.events ends the sandbox), pause,
    # resume and fork with every layer again from the host, refused images.
    # Not the microvm's checkpoints: QEMU under this TCG guest's TCG does not
    # boot within the runner's hello
    Suite("root-gvisor", "root", "root", "cgroup v2",
          [TIERS, SNAP_PAUSE, SNAP_RESUME, "-k",
           "not microvm and (gvisor or pause or resume or fork or image)"],
          20, {"CB_SECURITY_KERNELS": "cellblock"}),
    # what each cell cost and usage_request (issue 22) from v2's files
    Suite("root-costs", "root", "root", "cgroup v2",
          [POLICY + "::test_every_reply_carries_its_costs",
           POLICY + "::test_usage_request_answers_as_ipykernel_does_with_the_sandboxs_figures"],
          2),
    # root in a system service: without Delegate= DEGRADED (systemd's groups are
    # not ours), with Delegate=yes (trusted.delegate) per-kernel groups
    Suite("service", "root", "service", "DEGRADED", [BANNER], 1),
    Suite("service-delegated", "root", "service-delegated", "cgroup v2", [BANNER, MEMORY], 2),
]


def selected():
    return FULL if os.environ.get("CB_GUEST_FULL") == "1" else SUBSET
