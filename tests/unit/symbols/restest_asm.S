/* Hand-written entries for the resolver's plans (check_resolve.py knows their bytes): each
 * function is one case of docs/design-probes.md section 2. */
        .data
asm_data:
        .quad 42

        .text
/* mov asm_data(%rip),%rax: 7 bytes, RIP-relative */
        .globl asm_rip
        .type asm_rip, @function
asm_rip:
        movq asm_data(%rip), %rax
        ret
        .size asm_rip, .-asm_rip

/* push, then a RIP-relative lea: 8 bytes */
        .globl asm_lea
        .type asm_lea, @function
asm_lea:
        push %rbx
        lea asm_data(%rip), %rbx
        mov (%rbx), %rax
        pop %rbx
        ret
        .size asm_lea, .-asm_lea

/* endbr64 stays: the site is +4 */
        .globl asm_endbr
        .type asm_endbr, @function
asm_endbr:
        endbr64
        push %rbp
        mov %rsp, %rbp
        sub $16, %rsp
        leave
        ret
        .size asm_endbr, .-asm_endbr

/* a short je leaving the displaced bytes: relocated */
        .globl asm_jcc_out
        .type asm_jcc_out, @function
asm_jcc_out:
        test %edi, %edi
        je 1f
        mov $1, %eax
        ret
1:      xor %eax, %eax
        ret
        .size asm_jcc_out, .-asm_jcc_out

/* a loop back to +3, inside the displaced bytes: refused */
        .globl asm_jcc_in
        .type asm_jcc_in, @function
asm_jcc_in:
        push %rbx
        xor %eax, %eax
2:      inc %eax
        cmp %edi, %eax
        jl 2b
        pop %rbx
        ret
        .size asm_jcc_in, .-asm_jcc_in

/* 3 bytes: no room for a jump */
        .globl asm_tiny
        .type asm_tiny, @function
asm_tiny:
        xor %eax, %eax
        ret
        .size asm_tiny, .-asm_tiny

/* a call as the only displaced instruction: its return address is the end of the patch */
        .globl asm_call
        .type asm_call, @function
asm_call:
        call asm_rip
        ret
        .size asm_call, .-asm_call

/* a call returning to +4, inside the displaced bytes: refused */
        .globl asm_call_early
        .type asm_call_early, @function
asm_call_early:
        xor %eax, %eax
        call *%rdi
        nop
        ret
        .size asm_call_early, .-asm_call_early

/* jrcxz has no 32-bit form: refused */
        .globl asm_jrcxz
        .type asm_jrcxz, @function
asm_jrcxz:
        jrcxz 3f
        mov $1, %eax
3:      ret
        .size asm_jrcxz, .-asm_jrcxz

/* a short jmp as the last displaced instruction */
        .globl asm_jmp8
        .type asm_jmp8, @function
asm_jmp8:
        push %rbx
        xor %eax, %eax
        jmp 4f
        int3
4:      pop %rbx
        ret
        .size asm_jmp8, .-asm_jmp8

/* a ret before the 5 bytes: refused */
        .globl asm_ret_early
        .type asm_ret_early, @function
asm_ret_early:
        xor %eax, %eax
        ret
        nop
        nop
        .size asm_ret_early, .-asm_ret_early

/* a tail call: jmp rel32 as the only displaced instruction */
        .globl asm_tail
        .type asm_tail, @function
asm_tail:
        {disp32} jmp asm_rip
        .size asm_tail, .-asm_tail

/* a piece split off the function (as gcc's f.cold) jumps back to +3, inside the displaced
 * bytes: refused */
        .globl asm_split
        .type asm_split, @function
asm_split:
        push %rbx
        xor %eax, %eax
5:      test %edi, %edi
        jne asm_split.cold
        pop %rbx
        ret
        .size asm_split, .-asm_split
        .type asm_split.cold, @function
asm_split.cold:
        dec %edi
        jmp 5b
        .size asm_split.cold, .-asm_split.cold

/* no .size: the extent is unknown */
        .globl asm_nosize
        .type asm_nosize, @function
asm_nosize:
        mov $7, %eax
        ret

        .section .note.GNU-stack, "", @progbits
