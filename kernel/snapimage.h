/*
 * snapimage.h - the kernel's store of paused sessions' images
 * (docs/SNAPSHOTS.md "Pause, resume and fork"): where they live, the key
 * that seals them, and the kernel's own record in each (kernel.json, its
 * HMAC in kernel.mac).  The sandbox's files in an image are sealed and
 * verified by the launcher (launcher/snapimage.c) with the same key.
 *
 * The store is a directory of the kernel's user, 0700, outside every
 * sandbox: CB_IMAGE_DIR_ROOT as root, else ~/CB_IMAGE_DIR_USER, or
 * --image-dir.  Its key (.key, 0600, CB_IMAGE_KEY_LEN random bytes) is made
 * on first use and never enters a sandbox.  Images are directories named by
 * their id (CB_IMAGE_ID_HEX hex digits), 0700, their files 0600.
 */
#ifndef CB_KERNEL_SNAPIMAGE_H
#define CB_KERNEL_SNAPIMAGE_H

#include <jansson.h>
#include <stddef.h>

#include "isolate/cb_limits.h"
#include "isolate/snap_limits.h"
#include "kernel/options.h"

/* The store's directory for these options, made (0700) with its key if
 * missing.  0 ok, -1 with why. */
int cb_image_store(const cb_opts_t *o, char *dir, size_t len, char *why, size_t why_len);
/* A new, empty image directory in the store: its id and an fd of it.  0 ok,
 * -1 with why. */
int cb_image_create(const char *store, char id[CB_IMAGE_ID_HEX + 1], int *fd, char *why,
                    size_t why_len);
/* Writes the kernel's record (borrowed) into the image open at fd, sealed.
 * 0 ok, -1 with why. */
int cb_image_seal_record(int fd, const json_t *record, char *why, size_t why_len);
/* The image named by ref (an id in the store, or a directory): its
 * directory in dir, and its record (a new reference) once kernel.mac
 * vouches for kernel.json, checked before it is parsed.  NULL with why. */
json_t *cb_image_open(const cb_opts_t *o, const char *ref, char *dir, size_t len, char *why,
                      size_t why_len);
/* Removes an image directory the kernel made but could not finish. */
void cb_image_discard(const char *store, const char *id);

#endif
