/* A versioned definition: the linker names it `foo@@V2` in .symtab; the symbolizer drops the
 * version (test_symbolize.py links this into a shared library with a version script). */
__attribute__((noipa)) int foo_v2(int x) { return x + 2; } /* MARK:foo-entry */
__asm__(".symver foo_v2, foo@@V2");
