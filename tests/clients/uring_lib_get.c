/* uring_get through libinline_uring.so (a liburing whose system calls are
 * inline): see uring_get.c */
#define URING_LIB
#include "uring_get.c"
