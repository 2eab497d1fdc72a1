// AVX-512 VNNI matmul kernels: the AVX-512 source with vpdpbusd for the int8 dot products.
#define SHRIKE_MM_VNNI 1
#include "matmul_avx512.cc"
