/* A small C library that tests/programs/heap_dlclose.c loads and unloads again and again
 * (plain C: no unique symbols, so dlclose really unmaps it). */
int dlclose_victim(int x) { return 3 * x + 1; }
