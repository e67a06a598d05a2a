
#ifdef __CUDACC_RTC__
  #include <cuda/std/cstdint>
  using cuda::std::uint8_t;
  using cuda::std::uint16_t;
  using cuda::std::uint32_t;
  using cuda::std::uint64_t;
  using cuda::std::int8_t;
  using cuda::std::int16_t;
  using cuda::std::int32_t;
  using cuda::std::int64_t;

  #include <cuda/std/type_traits>
  namespace std {
    using cuda::std::is_same;
    using cuda::std::is_same_v;
    using cuda::std::is_integral;
    using cuda::std::is_signed;
    using cuda::std::is_unsigned;
    using cuda::std::is_floating_point;
    using cuda::std::enable_if;
    using cuda::std::conditional;
  }

  // NVRTC uses asm/volatile instead of __asm__/__volatile__ (gcc extension).
  #ifndef __asm__
  #define __asm__ asm
  #endif
  #ifndef __volatile__
  #define __volatile__ volatile
  #endif
#else
  #include <cstdint>
  #include <type_traits>
  #include <cuda.h>
#endif

#if (((__CUDACC_VER_MAJOR__ == 11) && (__CUDACC_VER_MINOR__ >= 4)) || \
     (__CUDACC_VER_MAJOR__ > 11))
#define TVM_ENABLE_L2_PREFETCH 1
#else
#define TVM_ENABLE_L2_PREFETCH 0
#endif

#ifdef _WIN32
  using uint = unsigned int;
  using uchar = unsigned char;
  using ushort = unsigned short;
  using int64_t = long long;
  using uint64_t = unsigned long long;
#else
  #define uint unsigned int
  #define uchar unsigned char
  #define ushort unsigned short
#endif
extern "C" __global__ void __launch_bounds__(256) main_kernel(float* __restrict__ A_ptr, float* __restrict__ B_ptr, float* __restrict__ C_ptr);
extern "C" __global__ void __launch_bounds__(256) main_kernel(float* __restrict__ A_ptr, float* __restrict__ B_ptr, float* __restrict__ C_ptr) {
  alignas(64) float C_local_ptr[32];
  __shared__ alignas(64) float A_shared_ptr[512];
  __shared__ alignas(64) float B_shared_ptr[1024];
  for (int i_3_init = 0; i_3_init < 4; ++i_3_init) {
    for (int j_3_init = 0; j_3_init < 8; ++j_3_init) {
      C_local_ptr[((i_3_init * 8) + j_3_init)] = 0x0p+0f/*0.000000e+00*/;
    }
  }
  int cse_v1 = ((((int)blockIdx.x) >> 3) * 65536);
  int cse_v2 = ((((int)blockIdx.x) & 7) * 128);
  for (int k_0 = 0; k_0 < 128; ++k_0) {
    __syncthreads();
    if (((int)threadIdx.x) < 128) {
      *(float4*)(A_shared_ptr + (((int)threadIdx.x) * 4)) = *(float4*)(A_ptr + (((((((int)blockIdx.x) >> 3) * 65536) + (k_0 * 8)) + (((((int)threadIdx.x) * 4) >> 3) * 1024)) + ((((int)threadIdx.x) * 4) & 7)));
    }
    *(float4*)(B_shared_ptr + (((int)threadIdx.x) * 4)) = *(float4*)(B_ptr + (((((((int)blockIdx.x) & 7) * 128) + (k_0 * 8192)) + (((((int)threadIdx.x) * 4) >> 7) * 1024)) + ((((int)threadIdx.x) * 4) & 127)));
    __syncthreads();
    for (int k_1 = 0; k_1 < 4; ++k_1) {
      #pragma unroll
      for (int i_3 = 0; i_3 < 4; ++i_3) {
        #pragma unroll
        for (int j_3 = 0; j_3 < 8; ++j_3) {
          C_local_ptr[((i_3 * 8) + j_3)] = (C_local_ptr[((i_3 * 8) + j_3)] + (A_shared_ptr[((((((int)threadIdx.x) >> 4) * 32) + (i_3 * 8)) + (k_1 * 2))] * B_shared_ptr[((((k_1 * 2) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3)]));
          C_local_ptr[((i_3 * 8) + j_3)] = (C_local_ptr[((i_3 * 8) + j_3)] + (A_shared_ptr[((((((int)threadIdx.x) >> 4) * 32) + (i_3 * 8)) + ((k_1 * 2) + 1))] * B_shared_ptr[(((((k_1 * 2) + 1) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3)]));
        }
      }
    }
  }
  for (int ax1 = 0; ax1 < 4; ++ax1) {
    for (int ax2 = 0; ax2 < 8; ++ax2) {
      C_ptr[((((((((int)blockIdx.x) >> 3) * 64) + ((((int)threadIdx.x) >> 4) * 4)) + ax1) * 1024) + ((((((int)blockIdx.x) & 7) * 128) + ((((int)threadIdx.x) & 15) * 8)) + ax2))] = C_local_ptr[((ax1 * 8) + ax2)];
    }
  }
}

