/* The PLAN text of a match line (probe.h) into a ps_probe_plan_t.  The text comes from the
 * resolver or from a client of the control socket, so nothing in it is trusted: every number
 * is bounded, the instructions must tile the displaced bytes exactly, and each kind's field
 * must sit where that kind's encoding puts it (the patcher writes through these offsets).
 * vaddr and size are the match line's own fields: left as the caller set them. */
#include <string.h>

#include "probe.h"

typedef struct {
    const char *p;
} cursor_t;

/* A decimal field of at most 3 digits, then a space (last = 0) or the end (last = 1). */
static int field_dec(cursor_t *c, unsigned max, int last, unsigned *out)
{
    unsigned v = 0;
    int digits = 0;
    while (*c->p >= '0' && *c->p <= '9' && digits < 4) {
        v = v * 10 + (unsigned)(*c->p++ - '0');
        digits++;
    }
    if (digits == 0 || digits > 3 || v > max) return 0;
    *out = v;
    return last ? *c->p == '\0' : *c->p++ == ' ';
}

static int hex_digit(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* n bytes as 2n lowercase hex digits, then a space. */
static int field_bytes(cursor_t *c, uint8_t *out, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        int hi = hex_digit(c->p[0]), lo = hi < 0 ? -1 : hex_digit(c->p[1]);
        if (lo < 0) return 0;
        out[i] = (uint8_t)(hi * 16 + lo);
        c->p += 2;
    }
    return *c->p++ == ' ';
}

/* 0x and 1 to 16 lowercase hex digits, then a space or (last) the end. */
static int field_addr(cursor_t *c, int last, uint64_t *out)
{
    if (c->p[0] != '0' || c->p[1] != 'x') return 0;
    c->p += 2;
    uint64_t v = 0;
    int digits = 0;
    for (int d; (d = hex_digit(*c->p)) >= 0 && digits <= 16; c->p++, digits++)
        v = v * 16 + (uint64_t)d;
    if (digits == 0 || digits > 16) return 0;
    *out = v;
    return last ? *c->p == '\0' : *c->p++ == ' ';
}

static int kind_of(cursor_t *c)
{
    static const char *const names[] = {"copy ", "rip ", "rel32 ", "jmp8 ", "jcc8 "};
    for (int k = 0; k < 5; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(c->p, names[k], n) == 0) {
            c->p += n;
            return k;
        }
    }
    return -1;
}

/* Does the instruction's encoding (in the original bytes) agree with its kind and field? */
static const char *check_insn(const ps_probe_plan_t *p, const ps_probe_insn_t *in)
{
    const uint8_t *b = p->orig + in->off;
    switch (in->kind) {
    case PS_INSN_COPY:
        return in->field == 0 && in->target == 0 ? NULL : "copy: FIELD and TARGET must be 0";
    case PS_INSN_RIP:
        return in->field >= 1 && in->field + 4 <= in->len && in->target != 0
                   ? NULL : "rip: FIELD+4 beyond the instruction, or no TARGET";
    case PS_INSN_REL32: {
        int op = in->field == 1 && (b[0] == 0xe8 || b[0] == 0xe9);
        int jcc = in->field == 2 && b[0] == 0x0f && (b[1] & 0xf0) == 0x80;
        return (op || jcc) && in->len == in->field + 4 && in->target != 0
                   ? NULL : "rel32: not a call, jmp or jcc with rel32 at FIELD";
    }
    case PS_INSN_JMP8:
        return in->len == 2 && in->field == 1 && b[0] == 0xeb && in->target != 0
                   ? NULL : "jmp8: not EB rel8";
    default:
        return in->len == 2 && in->field == 1 && (b[0] & 0xf0) == 0x70 && in->target != 0
                   ? NULL : "jcc8: not 7x rel8";
    }
}

static const char *parse_insns(cursor_t *c, ps_probe_plan_t *p)
{
    unsigned at = 0;
    for (unsigned i = 0; i < p->ninsn; i++) {
        ps_probe_insn_t *in = &p->insn[i];
        unsigned off, len, field;
        int kind = kind_of(c);
        if (kind < 0) return "KIND: not copy, rip, rel32, jmp8 or jcc8";
        if (!field_dec(c, 255, 0, &off)) return "OFF: not a number below 256";
        if (off != at) return "OFF: the instructions do not follow each other from 0";
        if (!field_dec(c, 15, 0, &len) || len == 0) return "LEN: instruction length not 1 to 15";
        if (off + len > p->len) return "LEN: an instruction goes beyond the displaced bytes";
        if (!field_dec(c, 14, 0, &field)) return "FIELD: not a number below 15";
        int last = i + 1 == p->ninsn;
        if (!field_addr(c, last, &in->target))
            return last ? "TARGET: not 0x and lowercase hex, or text after the last group"
                        : "TARGET: not 0x and lowercase hex";
        in->kind = (uint8_t)kind;
        in->off = (uint8_t)off;
        in->len = (uint8_t)len;
        in->field = (uint8_t)field;
        const char *bad = check_insn(p, in);
        if (bad) return bad;
        at = off + len;
    }
    return at == p->len ? NULL : "NINSN: the instructions do not cover LEN bytes";
}

const char *ps_probe_plan_parse(const char *text, ps_probe_plan_t *p)
{
    cursor_t c = {text};
    unsigned site, len, ninsn;
    if (!field_dec(&c, 4, 0, &site) || (site != 0 && site != 4)) return "SITE: not 0 or 4";
    if (!field_dec(&c, PS_PROBE_MAX_DISPLACED, 0, &len) || len < 5)
        return "LEN: not a number from 5 to 32";
    if (!field_bytes(&c, p->orig, len)) return "ORIG: not LEN bytes of lowercase hex";
    if (!field_dec(&c, PS_PROBE_MAX_INSNS, 0, &ninsn) || ninsn == 0)
        return "NINSN: not a number from 1 to 16";
    p->site = (uint8_t)site;
    p->len = (uint8_t)len;
    p->ninsn = (uint8_t)ninsn;
    memset(p->orig + len, 0, sizeof p->orig - len);
    memset(p->insn, 0, sizeof p->insn);
    return parse_insns(&c, p);
}
