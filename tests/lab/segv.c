/* Kernel lab helper: dies of a user page fault (SIGSEGV via force_sig_fault). */
int main(void) { volatile int *p = (int *)16; return *p; }
