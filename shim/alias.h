/*
 * alias.h - a wrapper exported under a second name.
 *
 * glibc exports several functions under two names (__read and read,
 * _IO_fopen and fopen, preadv64v2 and preadv2 ...), and a program may bind
 * either; a name not wrapped goes past the library.  KP_ALIAS(NAME,
 * WRAPPER) makes NAME the wrapper's address, in assembler: the wrappers
 * are defined with other C types than libc declares (a fixed argument for
 * open's and fcntl's optional one) and other attributes, which a C alias
 * would have to repeat.  tests/structure.py's aliases check (make unit)
 * fails where a name libc gives a function we wrap is not exported by the
 * library too (docs/structure.md "The names a program binds").
 */
#ifndef KP_ALIAS_H
#define KP_ALIAS_H

#define KP_ALIAS(name, wrapper)                                                            \
	__asm__(".globl " #name "\n\t.type " #name ", @function\n\t.set " #name ", " #wrapper \
		"\n")

#endif
