/* ps_probe_entry_common: where every probe's stub jumps, with the probe id in r11d, the
 * caller's r11 at -8(%rsp) and the stack as at the probed function's first instruction (the
 * return address at (rsp)).
 *
 * A disabled probe (or no hook set) goes straight to its relocated copy.  An enabled one saves
 * the general registers below and calls ps_probe_enter_fast(id, slot) (runtime/probe/enter.c,
 * C for the general registers only): a call from the same site and activation as the last
 * one is recorded there, and nothing else needs saving.  Otherwise it saves
 * every register the probed function's caller may expect unchanged or the function may read
 * on arrival, calls ps_probe_entry_hook(id, slot, rbp at the site) on a 64-byte aligned stack,
 * restores them and jumps to the copy with rsp as it was at the site.  Saved: rdi rsi rdx rcx
 * r8 r9 (arguments), rax (al: the vector-argument count of variadic calls), r10 (static
 * chain), and all the x87, SSE, AVX and AVX-512 state by XSAVEC (unwind.h: ps_xsave_choose;
 * FXSAVE without XSAVE): not only the argument registers, since a caller compiled with GCC's
 * -fipa-ra may keep values in any call-clobbered register (xmm8-15, zmm16-31, k0-7) across a
 * call to a function it knows leaves them alone, and the hook's C code may reach glibc's AVX
 * string functions.  Then vzeroupper: the C code's legacy-SSE instructions would otherwise
 * each pay an AVX-SSE state transition (hundreds of ns) with the caller's upper halves dirty;
 * XRSTOR puts them back exactly.  (Explicit saves of zmm0-31 and k0-7 cost the same in
 * bench/probe.py; XSAVEC needs no variant per CPU.)  r11 too is given back (the flags are not):
 * the jump to the copy goes through the id's stack slot, read after rsp is back at the site's
 * -- it is then in the red zone, which the kernel's signal frames skip.
 *
 * ps_patch_t's layout (probe.h; patch.c asserts it): copy at 0, enabled at 8, 72 bytes. */
#define PATCH_SIZE 72
#define PATCH_ENABLED 8

        .text
        .globl ps_probe_entry_common
        .hidden ps_probe_entry_common
        .type ps_probe_entry_common, @function
        .p2align 4
ps_probe_entry_common:
        .cfi_startproc
        endbr64
        lea -8(%rsp), %rsp              /* the caller's r11, which the stub stored there */
        .cfi_adjust_cfa_offset 8
        push %rax
        .cfi_adjust_cfa_offset 8
        push %r11                       /* the id (zero-extended by the stub's mov) */
        .cfi_adjust_cfa_offset 8
        imul $PATCH_SIZE, %r11, %r11
        mov ps_patches@GOTPCREL(%rip), %rax
        add %rax, %r11                  /* r11 = &ps_patches[id] */
        cmpl $0, PATCH_ENABLED(%r11)
        je .Lcopy
        mov ps_probe_entry_hook@GOTPCREL(%rip), %rax
        cmpq $0, (%rax)
        jne .Lhook
.Lcopy:                                 /* 0 id, 8 rax, 16 r11, 24 the return address */
        .cfi_remember_state
        mov (%r11), %r11
        mov %r11, (%rsp)                /* where to go, in the id's place */
        mov 8(%rsp), %rax
        mov 16(%rsp), %r11
        lea 24(%rsp), %rsp
        .cfi_adjust_cfa_offset -24
        jmp *-24(%rsp)                  /* (the red zone: no signal frame overwrites it) */
.Lhook:
        .cfi_restore_state
        push %rdi
        .cfi_adjust_cfa_offset 8
        push %rsi
        .cfi_adjust_cfa_offset 8
        push %rdx
        .cfi_adjust_cfa_offset 8
        push %rcx
        .cfi_adjust_cfa_offset 8
        push %r8
        .cfi_adjust_cfa_offset 8
        push %r9
        .cfi_adjust_cfa_offset 8
        push %r10
        .cfi_adjust_cfa_offset 8
        push %r11
        .cfi_adjust_cfa_offset 8
        push %rbp
        .cfi_adjust_cfa_offset 8
        .cfi_rel_offset %rbp, 0
        mov %rsp, %rbp                  /* 0 rbp, 8 r11 ... 64 rdi, 72 id, 80 rax, 96 slot */
        .cfi_def_cfa_register %rbp
        and $-16, %rsp                  /* the fast path: C for the general registers only */
        mov 72(%rbp), %edi
        lea 96(%rbp), %rsi
        call ps_probe_enter_fast
        test %eax, %eax
        jnz .Lfast_done
        mov ps_xsave_size(%rip), %ecx
        cmpl $0, ps_xsave_kind(%rip)
        je .Lfxsave
        sub %rcx, %rsp
        and $-64, %rsp
        xor %ecx, %ecx                  /* XRSTOR wants the header's reserved bytes zero */
        mov %rcx, 512(%rsp)
        mov %rcx, 520(%rsp)
        mov %rcx, 528(%rsp)
        mov %rcx, 536(%rsp)
        mov %rcx, 544(%rsp)
        mov %rcx, 552(%rsp)
        mov %rcx, 560(%rsp)
        mov %rcx, 568(%rsp)
        mov ps_xsave_mask(%rip), %eax
        mov ps_xsave_mask+4(%rip), %edx
        cmpl $2, ps_xsave_kind(%rip)
        jne .Lxsave
        xsavec (%rsp)
        jmp .Lclean
.Lxsave:
        xsave (%rsp)
.Lclean:
        testb $4, ps_xsave_mask(%rip)   /* AVX: clean upper halves for the C code's SSE */
        jz .Lcall
        vzeroupper
        jmp .Lcall
.Lfxsave:
        sub $512, %rsp
        and $-64, %rsp
        fxsave (%rsp)
.Lcall:
        mov 72(%rbp), %edi
        lea 96(%rbp), %rsi
        mov 0(%rbp), %rdx               /* rbp at the site */
        mov ps_probe_entry_hook@GOTPCREL(%rip), %rax
        call *(%rax)
        cmpl $0, ps_xsave_kind(%rip)
        je .Lfxrstor
        mov ps_xsave_mask(%rip), %eax
        mov ps_xsave_mask+4(%rip), %edx
        xrstor (%rsp)                   /* (either format: XCOMP_BV says which) */
        jmp .Lfast_done
.Lfxrstor:
        fxrstor (%rsp)
.Lfast_done:
        mov %rbp, %rsp
        pop %rbp
        .cfi_def_cfa %rsp, 96
        .cfi_restore %rbp
        pop %r11
        .cfi_adjust_cfa_offset -8
        pop %r10
        .cfi_adjust_cfa_offset -8
        pop %r9
        .cfi_adjust_cfa_offset -8
        pop %r8
        .cfi_adjust_cfa_offset -8
        pop %rcx
        .cfi_adjust_cfa_offset -8
        pop %rdx
        .cfi_adjust_cfa_offset -8
        pop %rsi
        .cfi_adjust_cfa_offset -8
        pop %rdi
        .cfi_adjust_cfa_offset -8
        jmp .Lcopy
        .cfi_endproc
        .size ps_probe_entry_common, .-ps_probe_entry_common
        .section .note.GNU-stack, "", @progbits
