/*
 * elf_scan.h - what a loaded object imports, read from its dynamic section
 * as the loader relocated it (base: libc only).  Used where the library
 * must know, before a program's call, whether some object could reach past
 * our wrappers (aio_scan.c: an inline io_submit; tls_handout.c: names that
 * see past a hand-out).
 */
#ifndef KP_ELF_SCAN_H
#define KP_ELF_SCAN_H

#include <link.h>
#include <stdbool.h>

#pragma GCC visibility push(hidden)

/* Does the object info describes import a name match() accepts (an
 * undefined symbol among its relocations, PLT or not)?  The vDSO and an
 * object without a symbol table import nothing. */
bool kp_elf_imports(const struct dl_phdr_info *info, bool (*match)(const char *name, const void *arg),
		    const void *arg);

/* The loader's count of objects ever loaded (dlpi_adds): a scan is
 * redone only when it moved. */
unsigned long long kp_elf_adds(void);

#pragma GCC visibility pop

#endif
