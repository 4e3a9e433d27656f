#ifndef LATCHKEY_CCBOR_SHIM_H
#define LATCHKEY_CCBOR_SHIM_H
#include <cbor.h>
#endif
