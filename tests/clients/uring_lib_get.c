/* uring_get through liburing_inline.so (a liburing whose system calls are
 * inline): see uring_get.c */
#define URING_LIB
#include "uring_get.c"
