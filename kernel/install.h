/*
 * install.h - `cellblock-kernel install`: write a kernelspec with limits
 * baked into its argv, the way `python -m ipykernel install` does.
 */
#ifndef CB_INSTALL_H
#define CB_INSTALL_H

/* argv[0] is "install". Returns the process exit status. */
int cb_install_main(int argc, char **argv);

#endif
