
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
extern "C" __global__ void __launch_bounds__(256) tiled_matmul_kernel(float* __restrict__ A_ptr, float* __restrict__ B_ptr, float* __restrict__ C_ptr);
extern "C" __global__ void __launch_bounds__(256) tiled_matmul_kernel(float* __restrict__ A_ptr, float* __restrict__ B_ptr, float* __restrict__ C_ptr) {
  alignas(64) float C_local_ptr[1];
  __shared__ alignas(64) float A_shared_ptr[256];
  __shared__ alignas(64) float B_shared_ptr[256];
  C_local_ptr[0] = 0x0p+0f/*0.000000e+00*/;
  int cse_v1 = (((int)threadIdx.y) * 128);
  int cse_v3 = (((int)blockIdx.x) * 16);
  int cse_v4 = ((((int)blockIdx.y) * 2048) + (((int)threadIdx.y) * 128));
  for (int k_0 = 0; k_0 < 8; ++k_0) {
    int cse_v2 = (((int)threadIdx.y) * 16);
    int cse_v5 = ((((int)threadIdx.y) * 16) + ((int)threadIdx.x));
    __syncthreads();
    A_shared_ptr[((((int)threadIdx.y) * 16) + ((int)threadIdx.x))] = A_ptr[((((((int)blockIdx.y) * 2048) + (((int)threadIdx.y) * 128)) + (k_0 * 16)) + ((int)threadIdx.x))];
    B_shared_ptr[((((int)threadIdx.y) * 16) + ((int)threadIdx.x))] = B_ptr[((((k_0 * 2048) + (((int)threadIdx.y) * 128)) + (((int)blockIdx.x) * 16)) + ((int)threadIdx.x))];
    __syncthreads();
    for (int k_1 = 0; k_1 < 16; ++k_1) {
      C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[((((int)threadIdx.y) * 16) + k_1)] * B_shared_ptr[((k_1 * 16) + ((int)threadIdx.x))]));
    }
  }
  C_ptr[((((((int)blockIdx.y) * 2048) + (((int)threadIdx.y) * 128)) + (((int)blockIdx.x) * 16)) + ((int)threadIdx.x))] = C_local_ptr[0];
}

