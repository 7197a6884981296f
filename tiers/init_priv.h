/*
 * init_priv.h - what the parts of cellblock-init share: init.c (main, the
 * micro-VM's /init) and init_gvisor.c (pid 1 inside gVisor, and the relay of
 * checkpoint commands into it).  cellblock-init is static and links libc,
 * these files, the checkpoint agent (snap_agent.c, snap_proc.c, snap_tree.c)
 * and splice.c only.
 */
#ifndef CB_TIERS_INIT_PRIV_H
#define CB_TIERS_INIT_PRIV_H

/* Default dispositions and an empty mask, for a child before its exec. */
void cb_init_child_signals(void);
/* cellblock-init --gvisor SECCOMP_BPF UID GID -- PROGRAM ARGS... */
int cb_init_gvisor(int argc, char **argv);
/* cellblock-init --agent LINE */
int cb_init_agent_client(const char *line);

#endif
