// libFuzzer's driver entry (compiler-rt FuzzerInterface.h), linked in by -sanitize=fuzzer. Only
// the fuzz build (-DFUZZING) calls it; the normal build never references the symbol.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
