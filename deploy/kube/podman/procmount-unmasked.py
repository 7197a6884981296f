#!/usr/bin/python3
"""procmount-unmasked.py - an OCI "precreate" hook for podman that does what
Kubernetes runtimes (containerd, CRI-O) do for `procMount: Unmasked`: drop the
/proc entries from the container's maskedPaths and readonlyPaths.

podman 4.3's `kube play` reads the rest of a pod's securityContext but not
procMount; deploy/kube's checks run it with this hook, selected by the
annotation io.cellblock.procMount=Unmasked, which they set only for pods
whose YAML asks for procMount: Unmasked.  The hook reads the OCI runtime
config on stdin and writes the changed config on stdout (oci-hooks(5)).
Nothing else is changed: /sys stays masked, and the user, capabilities,
seccomp profile and no_new_privs are the pod's.
"""
import json
import sys


def unmask_proc(config):
    linux = config.setdefault("linux", {})
    for key in ("maskedPaths", "readonlyPaths"):
        paths = linux.get(key) or []
        linux[key] = [p for p in paths if p != "/proc" and not p.startswith("/proc/")]
    return config


if __name__ == "__main__":
    json.dump(unmask_proc(json.load(sys.stdin)), sys.stdout)
