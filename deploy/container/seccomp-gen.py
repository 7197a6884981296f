#!/usr/bin/python3
"""seccomp-gen.py - the container seccomp profile cellblock needs: a runtime's
default profile plus the calls the launcher makes to build its sandbox.

    python3 deploy/container/seccomp-gen.py [DEFAULT.json] > deploy/container/seccomp.json

DEFAULT.json is the runtime's default profile in the OCI/Docker JSON format
(default: /usr/share/containers/seccomp.json, Debian's containers-common, the
profile podman applies).  The output is that profile with:

  - the calls below allowed without CAP_SYS_ADMIN: runtimes allow them only
    to containers that hold CAP_SYS_ADMIN (Docker, containerd's
    RuntimeDefault) or refuse some of them outright (podman: sethostname);
    the launcher runs as an ordinary user with no capability and makes them
    inside the user namespace it creates, where they act on its own
    namespaces only;
  - nothing else changed: every other rule of the default stays as it is.

What the launcher calls, and why (launcher/sandbox.c, isolate/):
  clone        CLONE_NEWUSER|NEWPID|NEWNS|NEWNET|NEWIPC|NEWUTS: the sandbox
  unshare      CLONE_NEWCGROUP in the sandbox's init
  mount        tmpfs root, read-only binds, procfs, remounts
  umount2      the old root after pivot_root
  pivot_root   into the tmpfs root
  mount_setattr  recursive read-only binds (newer kernels)
  sethostname  the sandbox's own UTS namespace
  landlock_*   write restrictions (recent runtimes' defaults allow them already)

The code in the sandbox does not get these: the launcher installs cellblock's
own allowlist (isolate/seccomp.c: no namespaces, no mount, ...) before it
execs the runner, and seccomp filters stack (the stricter answer wins).
"""
import copy
import json
import sys

NEEDED = ["clone", "unshare", "mount", "umount2", "pivot_root", "mount_setattr", "sethostname",
          "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"]
DEFAULT = "/usr/share/containers/seccomp.json"
COMMENT = ("cellblock-launcher: namespaces, mounts, pivot_root and hostname for its sandbox, "
           "made by an unprivileged user inside its own user namespace "
           "(deploy/container/seccomp-gen.py)")


def generate(profile):
    out = copy.deepcopy(profile)
    kept = []
    for rule in out["syscalls"]:
        names = [n for n in rule["names"] if n not in NEEDED]
        # a rule that refuses one of ours (ERRNO, or ALLOW gated on caps/args) loses that name;
        # unconditional ALLOW rules are kept as they are
        plain_allow = rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args") and \
            not rule.get("includes") and not rule.get("excludes")
        if plain_allow or len(names) == len(rule["names"]):
            kept.append(rule)
        elif names:
            rule = dict(rule, names=names)
            kept.append(rule)
    kept.append({"names": NEEDED, "action": "SCMP_ACT_ALLOW", "args": [], "comment": COMMENT,
                 "includes": {}, "excludes": {}})
    out["syscalls"] = kept
    return out


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else DEFAULT
    with open(src) as f:
        profile = json.load(f)
    json.dump(generate(profile), sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
