#ifndef LATCHKEY_CEPOLL_SHIM_H
#define LATCHKEY_CEPOLL_SHIM_H
// Linux's epoll and eventfd (glibc, nothing to link), which Swift's Glibc module leaves out.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif
