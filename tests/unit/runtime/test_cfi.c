/* Unit tests of the unwinder's CFI decoding: the CFA program interpreter on crafted CFI byte
 * sequences (ps_unwind_cfa_run) and the FDE search through a crafted .eh_frame_hdr and
 * .eh_frame (ps_unwind_fde_find).  Expected states are worked out by hand next to each case
 * (DWARF 5, section 6.4.2; data alignment -8 and return-address register 16 as on x86-64).
 * The CFA expression machine (ps_unwind_eval_cfa_expr) looks its pc up in the module table, so
 * it is left to the end-to-end tests (PLT stubs are walked through in every MPI call).
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "unwind_internal.h"

#define PC0 0x1000u /* pc_begin of the crafted FDEs of part 1 */

/* The usual x86-64 CIE program: DW_CFA_def_cfa rsp+8; DW_CFA_offset r16 (return address) at
 * CFA + 1 x -8. */
static const uint8_t cie_std[] = {0x0c, 0x07, 0x08, 0x90, 0x01};

static int run_at(const uint8_t *fde, size_t n, uint64_t code_align, uintptr_t pc, cfa_state_t *st)
{
    fde_t f;
    memset(&f, 0, sizeof f);
    f.pc_begin = PC0;
    f.pc_end = PC0 + 0x100000;
    f.cie_insns = cie_std;
    f.cie_insns_end = cie_std + sizeof cie_std;
    f.insns = fde;
    f.insns_end = fde + n;
    f.code_align = code_align;
    f.data_align = -8;
    f.ra_reg = 16;
    memset(st, 0x55, sizeof *st); /* ps_unwind_cfa_run must set every field */
    return ps_unwind_cfa_run(&f, pc, st);
}
#define RUN(prog, pc, st) run_at((prog), sizeof(prog), 1, (pc), (st))

/* cfa = reg + off; rbp saved at CFA + rbp_off (saved = 0: rbp unchanged) */
#define CHECK_RULE(st, reg, off, saved, roff)                                             \
    do {                                                                                  \
        CHECK_INT((st).cfa_reg, (reg));                                                   \
        CHECK_INT((st).cfa_off, (off));                                                   \
        CHECK_INT((st).rbp_saved, (saved));                                               \
        if (saved) CHECK_INT((st).rbp_off, (roff));                                       \
    } while (0)

static void test_prologue_epilogue(void)
{
    /* push rbp; mov rbp,rsp; ...; leave (GCC -fno-omit-frame-pointer):
     *   advance 1; def_cfa_offset 16; offset rbp at 2 x -8 = -16;
     *   advance 3; def_cfa_register rbp;
     *   advance 10; def_cfa rsp+8 */
    static const uint8_t prog[] = {0x41, 0x0e, 0x10, 0x86, 0x02, 0x43, 0x0d, 0x06, 0x4a,
                                   0x0c, 0x07, 0x08};
    cfa_state_t st;
    /* 0x1000: the first advance (to 0x1001) passes pc: the CIE's state */
    CHECK_INT(RUN(prog, PC0, &st), 1);
    CHECK_RULE(st, DW_RSP, 8, 0, 0);
    CHECK_INT(st.ra_off_ok, 1);
    CHECK_INT(st.ra_undefined, 0);
    CHECK_INT(st.rbp_from_rbp, 0);
    /* 0x1001..0x1003: after the push */
    CHECK_INT(RUN(prog, PC0 + 1, &st), 1);
    CHECK_RULE(st, DW_RSP, 16, 1, -16);
    CHECK_INT(RUN(prog, PC0 + 3, &st), 1);
    CHECK_RULE(st, DW_RSP, 16, 1, -16);
    /* 0x1004..0x100d: the frame pointer is set up, CFA = rbp + 16 */
    CHECK_INT(RUN(prog, PC0 + 4, &st), 1);
    CHECK_RULE(st, DW_RBP, 16, 1, -16);
    CHECK_INT(RUN(prog, PC0 + 13, &st), 1);
    CHECK_RULE(st, DW_RBP, 16, 1, -16);
    /* 0x100e on, to the end of the program: after leave, CFA = rsp + 8 (rbp's save slot is
     * not restored by the program, so it stays described) */
    CHECK_INT(RUN(prog, PC0 + 14, &st), 1);
    CHECK_RULE(st, DW_RSP, 8, 1, -16);
    CHECK_INT(RUN(prog, PC0 + 0xfff, &st), 1);
    CHECK_RULE(st, DW_RSP, 8, 1, -16);
    CHECK_INT(st.ra_off_ok, 1);
}

static void test_remember_restore(void)
{
    /* advance 1; def_cfa_offset 16; offset rbp -16; advance 1 (0x1002);
     * remember_state; def_cfa_offset 8; restore rbp (to the CIE's: not saved);
     * advance 1 (0x1003); restore_state */
    static const uint8_t prog[] = {0x41, 0x0e, 0x10, 0x86, 0x02, 0x41, 0x0a, 0x0e, 0x08,
                                   0xc6, 0x41, 0x0b};
    cfa_state_t st;
    CHECK_INT(RUN(prog, PC0 + 1, &st), 1);
    CHECK_RULE(st, DW_RSP, 16, 1, -16);
    CHECK_INT(RUN(prog, PC0 + 2, &st), 1); /* an early return's epilogue */
    CHECK_RULE(st, DW_RSP, 8, 0, 0);
    CHECK_INT(RUN(prog, PC0 + 3, &st), 1); /* back to the remembered body's rule */
    CHECK_RULE(st, DW_RSP, 16, 1, -16);

    /* restore_state with nothing remembered: unsupported CFI */
    static const uint8_t empty_restore[] = {0x0b};
    CHECK_INT(RUN(empty_restore, PC0, &st), 0);
    /* nine nested remember_states: deeper than the 8 states kept */
    static const uint8_t deep[] = {0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a};
    CHECK_INT(RUN(deep, PC0, &st), 0);
    static const uint8_t eight[] = {0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a};
    CHECK_INT(RUN(eight, PC0, &st), 1);
}

static void test_advances(void)
{
    /* code alignment 4: advance_loc1 3 -> 0x1000 + 3x4 = 0x100c; def_cfa_offset 32;
     * advance_loc2 0x0010 -> + 64 = 0x104c; def_cfa_offset 48;
     * advance_loc4 0x00010000 -> + 0x40000 = 0x4104c; def_cfa_offset 64 */
    static const uint8_t prog[] = {0x02, 0x03, 0x0e, 0x20, 0x03, 0x10, 0x00, 0x0e, 0x30,
                                   0x04, 0x00, 0x00, 0x01, 0x00, 0x0e, 0x40};
    cfa_state_t st;
    CHECK_INT(run_at(prog, sizeof prog, 4, 0x100b, &st), 1);
    CHECK_INT(st.cfa_off, 8);
    CHECK_INT(run_at(prog, sizeof prog, 4, 0x100c, &st), 1);
    CHECK_INT(st.cfa_off, 32);
    CHECK_INT(run_at(prog, sizeof prog, 4, 0x104b, &st), 1);
    CHECK_INT(st.cfa_off, 32);
    CHECK_INT(run_at(prog, sizeof prog, 4, 0x104c, &st), 1);
    CHECK_INT(st.cfa_off, 48);
    CHECK_INT(run_at(prog, sizeof prog, 4, 0x4104b, &st), 1);
    CHECK_INT(st.cfa_off, 48);
    CHECK_INT(run_at(prog, sizeof prog, 4, 0x4104c, &st), 1);
    CHECK_INT(st.cfa_off, 64);

    /* set_loc 0x1100 (an 8-byte address); def_cfa_offset 24 */
    uint8_t setloc[12] = {0x01};
    uint64_t to = 0x1100;
    memcpy(setloc + 1, &to, 8);
    setloc[9] = 0x0e;
    setloc[10] = 0x18;
    setloc[11] = 0x00; /* nop */
    CHECK_INT(RUN(setloc, 0x10ff, &st), 1);
    CHECK_INT(st.cfa_off, 8);
    CHECK_INT(RUN(setloc, 0x1100, &st), 1);
    CHECK_INT(st.cfa_off, 24);
}

static void test_signed_and_extended(void)
{
    cfa_state_t st;
    /* def_cfa_sf rsp, -2 -> -2 x -8 = 16; GNU_args_size 16 (ignored); nop;
     * GNU_negative_offset_extended rbp, 3 -> -(3 x -8) = +24 */
    static const uint8_t a[] = {0x12, 0x07, 0x7e, 0x2e, 0x10, 0x00, 0x2f, 0x06, 0x03};
    CHECK_INT(RUN(a, PC0, &st), 1);
    CHECK_RULE(st, DW_RSP, 16, 1, 24);
    /* def_cfa_offset_sf -3 -> 24; offset_extended rbp, 4 -> -32 */
    static const uint8_t b[] = {0x13, 0x7d, 0x05, 0x06, 0x04};
    CHECK_INT(RUN(b, PC0, &st), 1);
    CHECK_RULE(st, DW_RSP, 24, 1, -32);
    /* offset_extended_sf r16, 2 -> -16: the return address is not at CFA - 8 */
    static const uint8_t c[] = {0x11, 0x10, 0x02};
    CHECK_INT(RUN(c, PC0, &st), 1);
    CHECK_INT(st.ra_off_ok, 0);
    /* ... and restore_extended r16 brings back the CIE's rule (CFA - 8) */
    static const uint8_t d[] = {0x11, 0x10, 0x02, 0x06, 0x10};
    CHECK_INT(RUN(d, PC0, &st), 1);
    CHECK_INT(st.ra_off_ok, 1);
    /* def_cfa rbp, 300 (a two-byte ULEB: 0xac 0x02) */
    static const uint8_t e[] = {0x0c, 0x06, 0xac, 0x02};
    CHECK_INT(RUN(e, PC0, &st), 1);
    CHECK_RULE(st, DW_RBP, 300, 0, 0);
}

static void test_registers(void)
{
    cfa_state_t st;
    /* undefined r16: the outermost frame */
    static const uint8_t outer[] = {0x07, 0x10};
    CHECK_INT(RUN(outer, PC0, &st), 1);
    CHECK_INT(st.ra_undefined, 1);
    /* offset rbp, then same_value rbp: not saved any more */
    static const uint8_t same[] = {0x86, 0x02, 0x08, 0x06};
    CHECK_INT(RUN(same, PC0, &st), 1);
    CHECK_INT(st.rbp_saved, 0);
    /* offset rbp, then undefined rbp: not saved either */
    static const uint8_t undef_rbp[] = {0x86, 0x02, 0x07, 0x06};
    CHECK_INT(RUN(undef_rbp, PC0, &st), 1);
    CHECK_INT(st.rbp_saved, 0);
    /* rbp or the return address in another register, or as a value: unsupported */
    static const uint8_t reg_rbp[] = {0x09, 0x06, 0x03};
    static const uint8_t reg_ra[] = {0x09, 0x10, 0x03};
    static const uint8_t valoff_rbp[] = {0x14, 0x06, 0x01};
    static const uint8_t valoff_sf_ra[] = {0x15, 0x10, 0x7f};
    CHECK_INT(RUN(reg_rbp, PC0, &st), 0);
    CHECK_INT(RUN(reg_ra, PC0, &st), 0);
    CHECK_INT(RUN(valoff_rbp, PC0, &st), 0);
    CHECK_INT(RUN(valoff_sf_ra, PC0, &st), 0);
    /* the same for a register the walker does not use (rbx = 3): ignored */
    static const uint8_t reg_rbx[] = {0x09, 0x03, 0x04, 0x14, 0x03, 0x01, 0x83, 0x03};
    CHECK_INT(RUN(reg_rbx, PC0, &st), 1);
    CHECK_RULE(st, DW_RSP, 8, 0, 0);
    /* an opcode the interpreter does not know (0x17..0x2d are unassigned or not used) */
    static const uint8_t unknown[] = {0x17};
    CHECK_INT(RUN(unknown, PC0, &st), 0);
}

static void test_expressions(void)
{
    cfa_state_t st;
    /* def_cfa_expression, 3 bytes: DW_OP_breg7 8; DW_OP_deref */
    static const uint8_t cfa_expr[] = {0x0f, 0x03, 0x77, 0x08, 0x06};
    CHECK_INT(RUN(cfa_expr, PC0, &st), 1);
    CHECK_INT(st.cfa_reg, -1);
    CHECK(st.cfa_expr == cfa_expr + 2);
    CHECK_INT(st.cfa_expr_len, 3);
    /* its length runs past the program: refused */
    static const uint8_t cfa_expr_cut[] = {0x0f, 0x05, 0x77};
    CHECK_INT(RUN(cfa_expr_cut, PC0, &st), 0);
    /* expression rbp = [DW_OP_breg6 -8]: GCC's realigned frames, rbp saved at rbp - 8 */
    static const uint8_t realigned[] = {0x10, 0x06, 0x02, 0x76, 0x78};
    CHECK_INT(RUN(realigned, PC0, &st), 1);
    CHECK_INT(st.rbp_saved, 1);
    CHECK_INT(st.rbp_from_rbp, 1);
    CHECK_INT(st.rbp_off, -8);
    /* ... a later offset rule for rbp is relative to the CFA again */
    static const uint8_t realigned_then[] = {0x10, 0x06, 0x02, 0x76, 0x78, 0x86, 0x03};
    CHECK_INT(RUN(realigned_then, PC0, &st), 1);
    CHECK_INT(st.rbp_from_rbp, 0);
    CHECK_INT(st.rbp_off, -24);
    /* any other expression for rbp, or a value expression: unsupported */
    static const uint8_t other_rbp[] = {0x10, 0x06, 0x01, 0x70};
    static const uint8_t val_rbp[] = {0x16, 0x06, 0x02, 0x76, 0x78};
    static const uint8_t breg6_trailing[] = {0x10, 0x06, 0x03, 0x76, 0x78, 0x06};
    CHECK_INT(RUN(other_rbp, PC0, &st), 0);
    CHECK_INT(RUN(val_rbp, PC0, &st), 0);
    CHECK_INT(RUN(breg6_trailing, PC0, &st), 0);
    /* an expression for rbx: skipped, the program goes on (def_cfa_offset 16) */
    static const uint8_t rbx_expr[] = {0x10, 0x03, 0x02, 0x76, 0x78, 0x0e, 0x10};
    CHECK_INT(RUN(rbx_expr, PC0, &st), 1);
    CHECK_INT(st.cfa_off, 16);
}

/* ---- the FDE search ------------------------------------------------------------------------ */
static uint8_t mem[1024] __attribute__((aligned(16)));
static size_t at;

static void put8(uint8_t v) { mem[at++] = v; }
static void put32(uint32_t v) { memcpy(mem + at, &v, 4); at += 4; }
static void put64(uint64_t v) { memcpy(mem + at, &v, 8); at += 8; }
static void set32(size_t pos, uint32_t v) { memcpy(mem + pos, &v, 4); }
static void pad4(void) { while (at % 4) put8(0x00); /* DW_CFA_nop */ }

/* A CIE: version 1, augmentation aug, code alignment 1, data alignment -8, return address
 * r16, then the standard program.  with_personality: augmentation data "P" (absolute 8-byte
 * pointer) "L" "R" (pcrel sdata4); else "R" only. */
static size_t put_cie(int with_personality, size_t *insns)
{
    size_t start = at;
    put32(0); /* length, set below */
    put32(0); /* CIE id */
    put8(1);
    const char *aug = with_personality ? "zPLR" : "zR";
    memcpy(mem + at, aug, strlen(aug) + 1);
    at += strlen(aug) + 1;
    put8(1);    /* code alignment */
    put8(0x78); /* data alignment -8 */
    put8(16);   /* return address register */
    if (with_personality) {
        put8(11);   /* augmentation data: P enc + 8, L enc, R enc */
        put8(0x00); /* P: absolute 8 bytes */
        put64(0x1234567890ull);
        put8(0x1b); /* L */
        put8(0x1b); /* R */
    } else {
        put8(1);
        put8(0x1b); /* R: pcrel sdata4 */
    }
    *insns = at;
    memcpy(mem + at, cie_std, sizeof cie_std);
    at += sizeof cie_std;
    pad4();
    set32(start, (uint32_t)(at - start - 4));
    return start;
}

/* An FDE for [target, target + range) of the CIE at cie: advance 1; def_cfa_offset 16. */
static size_t put_fde(size_t cie, uintptr_t target, uint32_t range, int lsda, size_t *insns)
{
    size_t start = at;
    put32(0);
    put32((uint32_t)(start + 4 - cie)); /* CIE pointer: back from this field */
    put32((uint32_t)(int32_t)(intptr_t)(target - (uintptr_t)(mem + at))); /* pcrel */
    put32(range);
    if (lsda) {
        put8(8); /* augmentation data: an LSDA pointer (skipped) */
        put64(0);
    } else {
        put8(0);
    }
    *insns = at;
    put8(0x41);
    put8(0x0e);
    put8(0x10);
    pad4();
    set32(start, (uint32_t)(at - start - 4));
    return start;
}

static void test_fde_find(void)
{
    const uint8_t *hdr = mem;
    /* three functions, 0x80 bytes each, 0x100 apart, at addresses near mem (pcrel fits) */
    uintptr_t fn[3];
    for (int k = 0; k < 3; k++) fn[k] = (uintptr_t)mem + 0x10000 + 0x100 * (uintptr_t)k;
    /* .eh_frame at mem + 64: CIE a (zR), CIE b (zPLR), FDE 0 and 1 of a, FDE 2 of b */
    at = 64;
    size_t cie_a_insns, cie_b_insns, fde_insns[3];
    size_t cie_a = put_cie(0, &cie_a_insns);
    size_t cie_b = put_cie(1, &cie_b_insns);
    size_t fde[3];
    fde[0] = put_fde(cie_a, fn[0], 0x80, 0, &fde_insns[0]);
    fde[1] = put_fde(cie_a, fn[1], 0x80, 0, &fde_insns[1]);
    fde[2] = put_fde(cie_b, fn[2], 0x80, 1, &fde_insns[2]);
    put32(0); /* terminator */
    /* .eh_frame_hdr at mem: version 1, eh_frame_ptr pcrel sdata4, count udata4, table
     * datarel sdata4 (initial location, FDE address), sorted */
    at = 0;
    put8(1);
    put8(0x1b);
    put8(0x03);
    put8(0x3b);
    put32((uint32_t)(64 - 4)); /* pcrel from this field (mem + 4) to mem + 64 */
    put32(3);
    for (int k = 0; k < 3; k++) {
        put32((uint32_t)(int32_t)(intptr_t)(fn[k] - (uintptr_t)hdr));
        put32((uint32_t)fde[k]);
    }

    fde_t f;
    CHECK_INT(ps_unwind_fde_find(hdr, fn[0] - 1, &f), 0); /* before the first function */
    memset(&f, 0, sizeof f);
    CHECK_INT(ps_unwind_fde_find(hdr, fn[0], &f), 1);
    CHECK(f.pc_begin == fn[0]);
    CHECK(f.pc_end == fn[0] + 0x80);
    CHECK_INT(f.code_align, 1);
    CHECK_INT(f.data_align, -8);
    CHECK_INT(f.ra_reg, 16);
    CHECK(f.cie_insns == mem + cie_a_insns);
    CHECK(f.cie_insns_end == mem + cie_b); /* the CIE's padding nops included */
    CHECK(f.insns == mem + fde_insns[0]);
    CHECK(f.insns_end == mem + fde[1]);
    CHECK_INT(ps_unwind_fde_find(hdr, fn[1] + 0x7f, &f), 1);
    CHECK(f.pc_begin == fn[1]);
    CHECK(f.insns == mem + fde_insns[1]);
    /* in the gap after function 1: the table finds FDE 1, whose range ends before pc */
    CHECK_INT(ps_unwind_fde_find(hdr, fn[1] + 0x80, &f), 0);
    /* FDE 2: personality and LSDA augmentation data skipped */
    CHECK_INT(ps_unwind_fde_find(hdr, fn[2] + 5, &f), 1);
    CHECK(f.pc_begin == fn[2]);
    CHECK(f.cie_insns == mem + cie_b_insns);
    CHECK(f.insns == mem + fde_insns[2]);
    CHECK_INT(ps_unwind_fde_find(hdr, fn[2] + 0x1000, &f), 0);
    /* and the program found runs: fn + 1 is after the push */
    cfa_state_t st;
    CHECK_INT(ps_unwind_fde_find(hdr, fn[2] + 1, &f), 1);
    CHECK_INT(ps_unwind_cfa_run(&f, fn[2] + 1, &st), 1);
    CHECK_RULE(st, DW_RSP, 16, 0, 0);
    CHECK_INT(ps_unwind_cfa_run(&f, fn[2], &st), 1);
    CHECK_RULE(st, DW_RSP, 8, 0, 0);

    /* what the search refuses: another header version, another table encoding, no FDEs */
    mem[0] = 2;
    CHECK_INT(ps_unwind_fde_find(hdr, fn[0], &f), 0);
    mem[0] = 1;
    mem[3] = 0x1b;
    CHECK_INT(ps_unwind_fde_find(hdr, fn[0], &f), 0);
    mem[3] = 0x3b;
    set32(8, 0);
    CHECK_INT(ps_unwind_fde_find(hdr, fn[0], &f), 0);
    set32(8, 3);
    CHECK_INT(ps_unwind_fde_find(hdr, fn[0], &f), 1);
}

int main(void)
{
    test_prologue_epilogue();
    test_remember_restore();
    test_advances();
    test_signed_and_extended();
    test_registers();
    test_expressions();
    test_fde_find();
    if (failures) fprintf(stderr, "test_cfi: %d failures\n", failures);
    return failures != 0;
}
