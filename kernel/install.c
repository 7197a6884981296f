/*
 * install.c - kernelspec installation (see install.h).
 *
 * Destination flags mirror ipykernel: --user (the Jupyter user data dir),
 * --prefix P (P/share/jupyter), --sys-prefix (the prefix cellblock itself
 * is installed in), default the system dir /usr/local/share/jupyter.  Every
 * other flag is a kernel option; it is validated with the kernel's own
 * parser before anything is written, then copied verbatim into argv.
 */
#include "kernel/install.h"

#include "isolate/cb_limits.h"
#include "isolate/util.h"
#include "kernel/options.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CB_INSTALL_ARGS_MAX 128        /* kernel options accepted */
#define CB_INSTALL_NAME_MAX 64         /* kernelspec directory name */
#define CB_LOGO_MAX         (1u << 20) /* bytes of a logo file copied */

static void s_usage(FILE *f) {
    fprintf(f,
            "usage: cellblock-kernel install [--user | --prefix P | --sys-prefix] [--name N]\n"
            "                                [--display-name D] [kernel options...]\n"
            "\n"
            "Writes a Jupyter kernelspec for cellblock. Kernel options (see\n"
            "cellblock-kernel --help: --memory, --pids, --cpus, --disk, --timeout,\n"
            "--network, --ro-bind, ...) are validated and baked into its argv, so\n"
            "several kernelspecs with different limits can coexist.\n"
            "\n"
            "  --user            install in the user's Jupyter data dir (~/.local/share/jupyter)\n"
            "  --prefix P        install in P/share/jupyter\n"
            "  --sys-prefix      install in the prefix cellblock is installed in\n"
            "  (default)         /usr/local/share/jupyter\n"
            "  --name N          kernelspec name (default cellblock; letters, digits, - . _)\n"
            "  --display-name D  name shown in frontends (default derived from the limits)\n");
}

static int s_mkdirs(const char *path) {
    char buf[CB_PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int) sizeof buf) return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return (mkdir(buf, 0755) < 0 && errno != EEXIST) ? -1 : 0;
}

static void s_copy_logo(const char *src_dir, const char *dst_dir, const char *name) {
    char src[CB_PATH_MAX], dst[CB_PATH_MAX];
    if (snprintf(src, sizeof src, "%s/%s", src_dir, name) >= (int) sizeof src) return;
    if (snprintf(dst, sizeof dst, "%s/%s", dst_dir, name) >= (int) sizeof dst) return;
    if (strcmp(src, dst) == 0) return;
    cb_autofd int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0) return;
    struct stat st;
    if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > CB_LOGO_MAX) return;
    cb_autofree char *buf = malloc((size_t) st.st_size + 1);
    if (buf == NULL || cb_read_all(in, buf, (size_t) st.st_size) < 0) return;
    cb_autofd int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out >= 0) (void) cb_write_all(out, buf, (size_t) st.st_size);
}

int cb_install_main(int argc, char **argv) {
    const char *name = "cellblock", *display = NULL, *prefix = NULL;
    bool user = false, sys_prefix = false;
    char *kargs[CB_INSTALL_ARGS_MAX + 4];
    int nk = 0;
    kargs[nk++] = "cellblock-kernel";
    kargs[nk++] = "-f";
    kargs[nk++] = "{connection_file}";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            s_usage(stdout);
            return 0;
        } else if (strcmp(a, "--user") == 0) {
            user = true;
        } else if (strcmp(a, "--sys-prefix") == 0) {
            sys_prefix = true;
        } else if ((strcmp(a, "--prefix") == 0 || strcmp(a, "--name") == 0 ||
                    strcmp(a, "--display-name") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cellblock-kernel install: %s needs a value\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (a[2] == 'p')
                prefix = v;
            else if (a[2] == 'n')
                name = v;
            else
                display = v;
        } else {
            if (nk >= CB_INSTALL_ARGS_MAX) {
                fprintf(stderr, "cellblock-kernel install: too many options\n");
                return 2;
            }
            kargs[nk++] = argv[i];
        }
    }
    if ((user + sys_prefix + (prefix != NULL)) > 1) {
        fprintf(stderr, "cellblock-kernel install: choose one of --user, --prefix, --sys-prefix\n");
        return 2;
    }
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen > CB_INSTALL_NAME_MAX ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") != nlen ||
        name[0] == '.') {
        fprintf(stderr, "cellblock-kernel install: invalid --name '%s' (letters, digits, - . _)\n",
                name);
        return 2;
    }
    /* Validate the kernel options with the kernel's own parser. */
    cb_opts_t *o = calloc(1, sizeof *o);
    if (o == NULL) return 1;
    int rc = cb_opts_parse(nk, kargs, o, "cellblock-kernel install", NULL, NULL);
    if (rc != CB_OPTS_RUN) {
        free(o);
        return rc == CB_OPTS_EXIT_OK ? 0 : 2;
    }

    char exe[CB_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) {
        perror("cellblock-kernel install: readlink(/proc/self/exe)");
        free(o);
        return 1;
    }
    exe[n] = '\0';
    char exe_copy[CB_PATH_MAX];
    snprintf(exe_copy, sizeof exe_copy, "%s", exe);
    char *bindir = dirname(exe_copy);

    char base[CB_PATH_MAX];
    const char *home = getenv("HOME");
    if (user) {
        const char *jdd = getenv("JUPYTER_DATA_DIR"), *xdg = getenv("XDG_DATA_HOME");
        if (jdd && *jdd)
            snprintf(base, sizeof base, "%s", jdd);
        else if (xdg && *xdg)
            snprintf(base, sizeof base, "%s/jupyter", xdg);
        else if (home && *home)
            snprintf(base, sizeof base, "%s/.local/share/jupyter", home);
        else {
            fprintf(stderr, "cellblock-kernel install: --user needs HOME\n");
            free(o);
            return 2;
        }
    } else if (prefix) {
        snprintf(base, sizeof base, "%s/share/jupyter", prefix);
    } else if (sys_prefix) {
        snprintf(base, sizeof base, "%s/../share/jupyter", bindir);
    } else {
        snprintf(base, sizeof base, "/usr/local/share/jupyter");
    }
    char dir[CB_PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/kernels/%s", base, name) >= (int) sizeof dir) {
        fprintf(stderr, "cellblock-kernel install: path too long\n");
        free(o);
        return 2;
    }

    char dname[512];
    if (display) {
        snprintf(dname, sizeof dname, "%s", display);
    } else {
        int l = snprintf(dname, sizeof dname, "Python 3 (cellblock");
        if (o->c.memory_mb != CB_DEFAULT_MEMORY_MB)
            l += snprintf(dname + l, sizeof dname - (size_t) l, ", %ld MiB", o->c.memory_mb);
        if (o->c.timeout_s != CB_DEFAULT_TIMEOUT_S)
            l += snprintf(dname + l, sizeof dname - (size_t) l, ", %ld s", o->c.timeout_s);
        if (strcmp(o->c.network, "host") == 0)
            l += snprintf(dname + l, sizeof dname - (size_t) l, ", host network");
        else if (strncmp(o->c.network, "allow:", 6) == 0)
            l += snprintf(dname + l, sizeof dname - (size_t) l, ", network allowlist");
        else if (nk > 3)
            l += snprintf(dname + l, sizeof dname - (size_t) l, ", no network");
        if (strcmp(o->c.isolation, "gvisor") == 0)
            l += snprintf(dname + l, sizeof dname - (size_t) l, ", gVisor");
        else if (strcmp(o->c.isolation, "microvm") == 0)
            l += snprintf(dname + l, sizeof dname - (size_t) l, ", micro-VM");
        if (strcmp(o->c.sandbox, "none") == 0)
            l += snprintf(dname + l, sizeof dname - (size_t) l, ", UNSANDBOXED");
        snprintf(dname + l, sizeof dname - (size_t) l, ")");
    }

    json_auto_t *jargv = json_array();
    json_array_append_new(jargv, json_string(exe));
    for (int i = 1; i < nk; i++)
        json_array_append_new(jargv, json_string(kargs[i]));
    json_auto_t *spec =
        json_pack("{s:O, s:s, s:s, s:s, s:{s:b, s:s}}", "argv", jargv, "display_name", dname,
                  "language", "python", "interrupt_mode", "message", "metadata", "debugger", 1,
                  "cellblock_version", CB_VERSION);
    free(o);
    if (spec == NULL || s_mkdirs(dir) < 0) {
        fprintf(stderr, "cellblock-kernel install: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char file[CB_PATH_MAX + 16];
    snprintf(file, sizeof file, "%s/kernel.json", dir);
    if (json_dump_file(spec, file, JSON_INDENT(2)) < 0) {
        fprintf(stderr, "cellblock-kernel install: cannot write %s\n", file);
        return 1;
    }
    char logos[CB_PATH_MAX];
    snprintf(logos, sizeof logos, "%s/../share/jupyter/kernels/cellblock", bindir);
    s_copy_logo(logos, dir, "logo-32x32.png");
    s_copy_logo(logos, dir, "logo-64x64.png");
    s_copy_logo(logos, dir, "logo-svg.svg");
    printf("Installed kernelspec %s in %s\n", name, dir);
    return 0;
}
