/*
 * warm_trust.h - is the interpreter's tree the kernel owner's to vouch for?
 *
 * A warm template (launcher/warm_tpl.c) runs the interpreter's start-up
 * (site, .pth files, sitecustomize), IPython and the --preload modules as
 * the kernel's user on the host, root, where a cold start runs them only
 * inside a sandbox.  So a tree someone else could write is a way to root
 * with warm starts on; such a configuration starts cold instead, saying why.
 */
#ifndef CB_LAUNCHER_WARM_TRUST_H
#define CB_LAUNCHER_WARM_TRUST_H

#include <stddef.h>

/* 0: every directory the template would run code from (the interpreter, its
 * prefix, the lib/python3* directories of /usr, /usr/local and that prefix
 * with their site- and dist-packages, the runner's directory), each of
 * their ancestors, and the entries directly in them, are owned by root or
 * this euid and writable by neither group nor others.  -1: why (the first
 * path that is not).  Not every file deeper down is looked at. */
int cb_warm_tree_trusted(const char *python, const char *runner, char *why, size_t len);

#endif
