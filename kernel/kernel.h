/*
 * kernel.h - the cellblock kernel: five sockets, one event loop.
 *
 * One thread runs everything except the heartbeat echo: shell, control and
 * stdin requests, iopub publishing, the runner's pipes and frames, the
 * launcher's reports and signals (signalfd).  Nothing in the loop blocks on
 * the sandbox, so control requests are answered while a cell runs.
 */
#ifndef CB_KERNEL_H
#define CB_KERNEL_H

#include "kernel/options.h"

/* Runs the kernel until shutdown. Returns the process exit status. */
int cb_kernel_main(cb_opts_t *opts);

#endif
