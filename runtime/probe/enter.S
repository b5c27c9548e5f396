/* ps_probe_entry_common: where every probe's stub jumps, with the probe id in r11d and the
 * stack as at the probed function's first instruction (the return address at (rsp)).
 *
 * A disabled probe (or no hook set) goes straight to its relocated copy.  An enabled one saves
 * what the function may read on arrival -- rdi rsi rdx rcx r8 r9 (arguments), rax (al: the
 * vector-argument count of variadic calls), r10 (static chain) and the vector argument
 * registers 0-7 -- calls ps_probe_entry_hook(id, slot, rbp at the site) on a 64-byte aligned
 * stack, restores them and jumps to the copy with rsp as it was at the site.  r11 and the
 * flags are scratch at a function's entry (SysV ABI) and are not kept.
 *
 * The vector registers are saved in full width, the variant chosen once from CPUID
 * (ps_probe_vector_width): xmm alone is not enough, since glibc's AVX string functions that
 * the hook's C code may reach end with vzeroupper, zeroing the upper halves of __m256/__m512
 * arguments.  (xsave would save all of it too, at several times the cost.)
 *
 * ps_patch_t's layout (probe.h; patch.c asserts it): copy at 0, enabled at 8, 72 bytes. */
#define PATCH_SIZE 72
#define PATCH_ENABLED 8
#define VEC_AREA 512

        .text
        .globl ps_probe_entry_common
        .hidden ps_probe_entry_common
        .type ps_probe_entry_common, @function
        .p2align 4
ps_probe_entry_common:
        .cfi_startproc
        endbr64
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
.Lcopy:
        .cfi_remember_state
        add $8, %rsp
        .cfi_adjust_cfa_offset -8
        pop %rax
        .cfi_adjust_cfa_offset -8
        jmp *(%r11)
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
        mov %rsp, %rbp                  /* 0 rbp, 8 r11 ... 64 rdi, 72 id, 80 rax, 88 slot */
        .cfi_def_cfa_register %rbp
        sub $VEC_AREA, %rsp
        and $-64, %rsp
        mov ps_probe_vector_width@GOTPCREL(%rip), %rax
        mov (%rax), %eax
        cmp $1, %eax
        je .Lsave_ymm
        ja .Lsave_zmm
        movaps %xmm0, 0(%rsp)
        movaps %xmm1, 16(%rsp)
        movaps %xmm2, 32(%rsp)
        movaps %xmm3, 48(%rsp)
        movaps %xmm4, 64(%rsp)
        movaps %xmm5, 80(%rsp)
        movaps %xmm6, 96(%rsp)
        movaps %xmm7, 112(%rsp)
        jmp .Lcall
.Lsave_ymm:
        vmovdqa %ymm0, 0(%rsp)
        vmovdqa %ymm1, 32(%rsp)
        vmovdqa %ymm2, 64(%rsp)
        vmovdqa %ymm3, 96(%rsp)
        vmovdqa %ymm4, 128(%rsp)
        vmovdqa %ymm5, 160(%rsp)
        vmovdqa %ymm6, 192(%rsp)
        vmovdqa %ymm7, 224(%rsp)
        jmp .Lcall
.Lsave_zmm:
        vmovdqa64 %zmm0, 0(%rsp)
        vmovdqa64 %zmm1, 64(%rsp)
        vmovdqa64 %zmm2, 128(%rsp)
        vmovdqa64 %zmm3, 192(%rsp)
        vmovdqa64 %zmm4, 256(%rsp)
        vmovdqa64 %zmm5, 320(%rsp)
        vmovdqa64 %zmm6, 384(%rsp)
        vmovdqa64 %zmm7, 448(%rsp)
.Lcall:
        mov 72(%rbp), %edi
        lea 88(%rbp), %rsi
        mov 0(%rbp), %rdx               /* rbp at the site */
        mov ps_probe_entry_hook@GOTPCREL(%rip), %rax
        call *(%rax)
        mov ps_probe_vector_width@GOTPCREL(%rip), %rax
        mov (%rax), %eax
        cmp $1, %eax
        je .Lrestore_ymm
        ja .Lrestore_zmm
        movaps 0(%rsp), %xmm0
        movaps 16(%rsp), %xmm1
        movaps 32(%rsp), %xmm2
        movaps 48(%rsp), %xmm3
        movaps 64(%rsp), %xmm4
        movaps 80(%rsp), %xmm5
        movaps 96(%rsp), %xmm6
        movaps 112(%rsp), %xmm7
        jmp .Lreturn
.Lrestore_ymm:
        vmovdqa 0(%rsp), %ymm0
        vmovdqa 32(%rsp), %ymm1
        vmovdqa 64(%rsp), %ymm2
        vmovdqa 96(%rsp), %ymm3
        vmovdqa 128(%rsp), %ymm4
        vmovdqa 160(%rsp), %ymm5
        vmovdqa 192(%rsp), %ymm6
        vmovdqa 224(%rsp), %ymm7
        jmp .Lreturn
.Lrestore_zmm:
        vmovdqa64 0(%rsp), %zmm0
        vmovdqa64 64(%rsp), %zmm1
        vmovdqa64 128(%rsp), %zmm2
        vmovdqa64 192(%rsp), %zmm3
        vmovdqa64 256(%rsp), %zmm4
        vmovdqa64 320(%rsp), %zmm5
        vmovdqa64 384(%rsp), %zmm6
        vmovdqa64 448(%rsp), %zmm7
.Lreturn:
        mov %rbp, %rsp
        pop %rbp
        .cfi_def_cfa %rsp, 88
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
        add $8, %rsp
        .cfi_adjust_cfa_offset -8
        pop %rax
        .cfi_adjust_cfa_offset -8
        jmp *(%r11)
        .cfi_endproc
        .size ps_probe_entry_common, .-ps_probe_entry_common
        .section .note.GNU-stack, "", @progbits
