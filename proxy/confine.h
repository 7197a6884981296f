/*
 * confine.h - what the egress proxy does to itself before it reads a byte
 * from the sandbox: give up root (ids of CB_PROXY_UID, no supplementary
 * groups, no capabilities), no_new_privs, not dumpable, Landlock (no file
 * but /etc/hosts and /dev/urandom readable, nothing writable or executable),
 * and a seccomp allowlist of the ~45 system calls a poll loop with c-ares
 * needs (sockets only AF_INET/AF_INET6, files only opened read-only).
 */
#ifndef CB_PROXY_CONFINE_H
#define CB_PROXY_CONFINE_H

#include <stddef.h>

/* Each step in turn; 0 ok, -1 with why.  Landlock missing from the running
 * kernel is not an error (*landlock_abi = 0). */
int cb_proxy_confine(int *landlock_abi, char *why, size_t why_len);

#endif
