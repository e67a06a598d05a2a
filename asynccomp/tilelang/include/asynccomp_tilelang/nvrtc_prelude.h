// asynccomp.tilelang's NVRTC prelude: TileLang's own NVRTC header (nvrtc_std.h), with
// CUtensorMap declared first as the toolkit's cuda.h declares it (alignas(128) since
// CUDA 13, alignas(64) before), where nvrtc_std.h always says 64: kernel parameters then
// sit where nvcc puts them. Included by every NVRTC compile of asynccomp.tilelang, ahead
// of the kernel's own #include lines (so it is part of the precompiled header too).
#pragma once

#ifndef CU_TENSOR_MAP_NUM_QWORDS
#define CU_TENSOR_MAP_NUM_QWORDS 16
#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 13
#define ASYNCCOMP_TL_TENSOR_MAP_ALIGN 128
#else
#define ASYNCCOMP_TL_TENSOR_MAP_ALIGN 64
#endif
struct CUtensorMap_st {
  alignas(ASYNCCOMP_TL_TENSOR_MAP_ALIGN) unsigned long long opaque[CU_TENSOR_MAP_NUM_QWORDS];
};
typedef struct CUtensorMap_st CUtensorMap;
#endif

#include <tl_templates/cuda/nvrtc_std.h>
