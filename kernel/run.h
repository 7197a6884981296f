/*
 * run.h - `cellblock run FILE`: run a script in a fresh sandbox from a shell
 * or CI job, without any Jupyter client (see run.c).
 */
#ifndef CB_RUN_H
#define CB_RUN_H

/* argv[0] is "run". Returns the process exit status. */
int cb_run_main(int argc, char **argv);

#endif
