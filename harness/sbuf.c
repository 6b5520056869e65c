/* A growing string the report renders into, and HTML escaping (see report.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

void rc_sb(rc_sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int need = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (need < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && b->n + (size_t)need < b->cap) {
            b->n += (size_t)need;
            return;
        }
        size_t nc = (b->cap + (size_t)need + 1) * 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
}

const char *rc_esc(const char *s, char *buf, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        const char *r = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : *s == '"' ? "&quot;" : NULL;
        if (r) {
            memcpy(buf + n, r, strlen(r));
            n += strlen(r);
        } else
            buf[n++] = *s;
    }
    buf[n] = 0;
    return buf;
}
