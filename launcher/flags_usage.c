/*
 * flags_usage.c - the flag table read back out (see flags.h): the --help
 * text of each program, and a configuration rendered as the canonical
 * launcher argv the kernel forwards.  It walks the table through
 * cb_flags_table(); flags.c owns the rows and their parsing.
 */
#include "launcher/flags.h"

#include <stdbool.h>
#include <string.h>

#define S_USAGE_LHS   28 /* width of the flag column */
#define S_USAGE_WIDTH 100 /* wrap help text here */
#define S_USAGE_TEXT  1024 /* bytes of one flag's help with its default and bounds */

/* One bound of a numeric flag: integers without exponent, floats short. */
static void s_bound(char *buf, size_t len, const cb_flag_t *f, double v) {
    if (f->kind == CB_FK_FLOAT)
        snprintf(buf, len, "%g", v);
    else
        snprintf(buf, len, "%.0f", v);
}

/* Writes text after an indent of `col` columns, wrapped at S_USAGE_WIDTH. */
static void s_wrapped(FILE *out, const char *text, size_t col) {
    size_t at = col;
    for (const char *w = text; *w;) {
        size_t n = strcspn(w, " ");
        if (at > col && at + 1 + n > S_USAGE_WIDTH) {
            fprintf(out, "\n%*s", (int) col, "");
            at = col;
        } else if (at > col) {
            fputc(' ', out);
            at++;
        }
        fprintf(out, "%.*s", (int) n, w);
        at += n;
        w += n;
        w += strspn(w, " ");
    }
    fputc('\n', out);
}

void cb_flags_usage(FILE *out, unsigned who) {
    static const char *const groups[] = {"kernel", "sandbox", "limits", "outputs", "snapshots"};
    size_t n_rows;
    const cb_flag_t *rows = cb_flags_table(&n_rows);
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        bool first = true;
        for (size_t i = 0; i < n_rows; i++) {
            const cb_flag_t *f = &rows[i];
            if (!(f->who & who) || strcmp(f->group, groups[g]) != 0) continue;
            /* the launcher's own (what the kernel gives it, never forwarded) */
            if ((who & CB_FLAG_KERNEL) && (f->who & CB_FLAG_NOFWD) && !(f->who & CB_FLAG_KERNEL))
                continue;
            if (first) fprintf(out, "\n%s:\n", groups[g]);
            first = false;
            char lhs[CB_FLAG_ERR_MAX], text[S_USAGE_TEXT], lo[CB_FLAG_NUM_MAX], hi[CB_FLAG_NUM_MAX];
            if (f->kind == CB_FK_BOOL)
                snprintf(lhs, sizeof lhs, "--%s", f->name);
            else if (f->kind == CB_FK_CHOICE)
                snprintf(lhs, sizeof lhs, "--%s %s", f->name, f->choices);
            else
                snprintf(lhs, sizeof lhs, "--%s %s", f->name, f->metavar);
            int n = snprintf(text, sizeof text, "%s", f->help);
            const char *sep = " (";
            if (f->def != NULL && n > 0 && (size_t) n < sizeof text) {
                n += snprintf(text + n, sizeof text - (size_t) n, "%sdefault %s%s%s", sep, f->def,
                              f->unit[0] ? " " : "", f->unit);
                sep = "; ";
            }
            bool numeric = f->kind == CB_FK_INT || f->kind == CB_FK_SIZE_MB || f->kind == CB_FK_FLOAT;
            if (numeric && n > 0 && (size_t) n < sizeof text) {
                s_bound(lo, sizeof lo, f, f->min);
                s_bound(hi, sizeof hi, f, f->max);
                n += snprintf(text + n, sizeof text - (size_t) n, "%s%s..%s%s%s", sep, lo, hi,
                              f->unit[0] ? " " : "", f->unit);
                sep = "; ";
            }
            if (sep[0] == ';' && n > 0 && (size_t) n < sizeof text)
                snprintf(text + n, sizeof text - (size_t) n, ")");
            /* a long flag (its choices) gets its own line */
            if (strlen(lhs) > S_USAGE_LHS)
                fprintf(out, "  %s\n%*s", lhs, S_USAGE_LHS + 3, "");
            else
                fprintf(out, "  %-*s ", S_USAGE_LHS, lhs);
            s_wrapped(out, text, S_USAGE_LHS + 3);
        }
    }
}

/* Adds "--name" and, unless NULL, its value to out. */
static int s_emit(const cb_flag_t *f, const char *val, const char **out, size_t max, size_t *n,
                  cb_flag_num_t *store, size_t store_n, size_t *s) {
    if (*n + (val ? 2 : 1) > max || *s >= store_n) return -1;
    snprintf(store[*s], CB_FLAG_NUM_MAX, "--%s", f->name);
    out[(*n)++] = store[(*s)++];
    if (val) out[(*n)++] = val;
    return 0;
}

int cb_flags_forward(const cb_config_t *c, const char **out, size_t max, cb_flag_num_t *store,
                     size_t store_n) {
    size_t n = 0, s = 0, n_rows;
    const cb_flag_t *rows = cb_flags_table(&n_rows);
    for (size_t i = 0; i < n_rows; i++) {
        const cb_flag_t *f = &rows[i];
        if (!(f->who & CB_FLAG_LAUNCHER) || (f->who & CB_FLAG_NOFWD)) continue;
        const char *p = (const char *) c + f->off;
        int rc = 0;
        switch (f->kind) {
        case CB_FK_BOOL:
            if (*(const bool *) p) rc = s_emit(f, NULL, out, max, &n, store, store_n, &s);
            break;
        case CB_FK_INT:
        case CB_FK_SIZE_MB:
            if (*(const long *) p == 0 && f->def == NULL) break; /* unset: launcher's default */
            if (s + 1 >= store_n) return -1;
            snprintf(store[s + 1], CB_FLAG_NUM_MAX, "%ld", *(const long *) p);
            rc = s_emit(f, store[s + 1], out, max, &n, store, store_n, &s);
            s++;
            break;
        case CB_FK_FLOAT:
            if (s + 1 >= store_n) return -1;
            snprintf(store[s + 1], CB_FLAG_NUM_MAX, "%.6g", *(const double *) p);
            rc = s_emit(f, store[s + 1], out, max, &n, store, store_n, &s);
            s++;
            break;
        default:
            if (f->who & CB_FLAG_REPEAT) {
                size_t cnt = *(const size_t *) ((const char *) c + f->count_off);
                for (size_t k = 0; k < cnt && rc == 0; k++)
                    rc = s_emit(f, ((const char *const *) p)[k], out, max, &n, store, store_n, &s);
            } else if (*(const char *const *) p != NULL) {
                rc = s_emit(f, *(const char *const *) p, out, max, &n, store, store_n, &s);
            }
            break;
        }
        if (rc < 0) return -1;
    }
    return (int) n;
}
