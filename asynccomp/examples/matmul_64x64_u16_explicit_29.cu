
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
  alignas(64) float C_local_ptr[16];
  __shared__ alignas(64) float A_shared_ptr[1024];
  __shared__ alignas(64) float B_shared_ptr[1024];
  for (int i_3_init = 0; i_3_init < 4; ++i_3_init) {
    for (int j_3_init = 0; j_3_init < 4; ++j_3_init) {
      C_local_ptr[((i_3_init * 4) + j_3_init)] = 0x0p+0f/*0.000000e+00*/;
    }
  }
  int cse_v1 = ((((int)blockIdx.x) >> 4) * 65536);
  int cse_v2 = ((((int)blockIdx.x) & 15) * 64);
  for (int k_0 = 0; k_0 < 64; ++k_0) {
    __syncthreads();
    *(float4*)(A_shared_ptr + (((int)threadIdx.x) * 4)) = *(float4*)(A_ptr + (((((((int)blockIdx.x) >> 4) * 65536) + (k_0 * 16)) + (((((int)threadIdx.x) * 4) >> 4) * 1024)) + ((((int)threadIdx.x) * 4) & 15)));
    *(float4*)(B_shared_ptr + (((int)threadIdx.x) * 4)) = *(float4*)(B_ptr + (((((((int)blockIdx.x) & 15) * 64) + (k_0 * 16384)) + (((((int)threadIdx.x) * 4) >> 6) * 1024)) + ((((int)threadIdx.x) * 4) & 63)));
    __syncthreads();
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[((((int)threadIdx.x) >> 4) * 64)] * B_shared_ptr[((((int)threadIdx.x) & 15) * 4)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[((((int)threadIdx.x) >> 4) * 64)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 1)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[((((int)threadIdx.x) >> 4) * 64)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 2)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[((((int)threadIdx.x) >> 4) * 64)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 3)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 16)] * B_shared_ptr[((((int)threadIdx.x) & 15) * 4)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 16)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 1)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 16)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 2)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 16)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 3)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 32)] * B_shared_ptr[((((int)threadIdx.x) & 15) * 4)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 32)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 1)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 32)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 2)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 32)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 3)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 48)] * B_shared_ptr[((((int)threadIdx.x) & 15) * 4)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 48)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 1)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 48)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 2)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 48)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 3)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 1)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 64)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 1)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 65)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 1)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 66)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 1)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 67)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 17)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 64)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 17)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 65)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 17)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 66)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 17)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 67)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 33)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 64)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 33)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 65)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 33)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 66)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 33)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 67)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 49)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 64)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 49)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 65)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 49)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 66)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 49)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 67)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 2)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 128)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 2)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 129)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 2)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 130)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 2)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 131)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 18)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 128)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 18)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 129)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 18)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 130)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 18)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 131)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 34)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 128)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 34)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 129)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 34)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 130)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 34)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 131)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 50)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 128)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 50)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 129)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 50)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 130)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 50)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 131)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 3)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 192)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 3)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 193)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 3)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 194)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 3)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 195)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 19)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 192)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 19)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 193)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 19)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 194)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 19)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 195)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 35)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 192)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 35)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 193)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 35)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 194)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 35)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 195)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 51)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 192)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 51)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 193)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 51)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 194)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 51)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 195)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 4)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 256)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 4)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 257)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 4)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 258)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 4)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 259)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 20)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 256)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 20)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 257)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 20)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 258)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 20)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 259)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 36)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 256)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 36)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 257)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 36)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 258)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 36)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 259)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 52)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 256)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 52)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 257)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 52)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 258)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 52)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 259)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 5)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 320)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 5)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 321)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 5)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 322)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 5)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 323)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 21)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 320)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 21)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 321)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 21)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 322)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 21)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 323)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 37)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 320)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 37)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 321)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 37)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 322)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 37)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 323)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 53)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 320)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 53)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 321)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 53)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 322)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 53)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 323)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 6)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 384)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 6)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 385)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 6)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 386)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 6)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 387)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 22)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 384)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 22)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 385)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 22)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 386)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 22)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 387)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 38)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 384)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 38)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 385)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 38)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 386)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 38)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 387)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 54)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 384)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 54)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 385)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 54)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 386)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 54)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 387)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 7)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 448)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 7)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 449)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 7)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 450)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 7)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 451)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 23)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 448)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 23)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 449)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 23)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 450)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 23)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 451)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 39)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 448)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 39)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 449)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 39)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 450)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 39)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 451)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 55)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 448)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 55)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 449)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 55)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 450)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 55)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 451)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 8)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 512)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 8)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 513)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 8)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 514)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 8)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 515)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 24)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 512)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 24)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 513)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 24)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 514)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 24)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 515)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 40)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 512)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 40)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 513)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 40)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 514)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 40)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 515)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 56)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 512)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 56)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 513)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 56)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 514)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 56)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 515)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 9)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 576)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 9)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 577)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 9)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 578)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 9)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 579)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 25)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 576)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 25)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 577)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 25)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 578)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 25)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 579)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 41)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 576)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 41)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 577)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 41)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 578)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 41)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 579)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 57)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 576)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 57)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 577)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 57)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 578)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 57)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 579)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 10)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 640)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 10)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 641)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 10)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 642)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 10)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 643)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 26)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 640)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 26)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 641)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 26)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 642)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 26)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 643)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 42)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 640)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 42)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 641)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 42)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 642)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 42)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 643)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 58)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 640)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 58)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 641)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 58)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 642)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 58)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 643)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 11)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 704)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 11)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 705)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 11)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 706)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 11)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 707)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 27)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 704)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 27)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 705)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 27)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 706)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 27)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 707)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 43)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 704)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 43)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 705)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 43)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 706)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 43)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 707)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 59)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 704)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 59)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 705)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 59)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 706)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 59)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 707)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 12)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 768)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 12)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 769)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 12)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 770)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 12)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 771)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 28)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 768)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 28)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 769)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 28)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 770)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 28)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 771)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 44)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 768)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 44)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 769)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 44)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 770)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 44)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 771)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 60)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 768)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 60)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 769)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 60)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 770)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 60)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 771)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 13)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 832)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 13)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 833)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 13)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 834)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 13)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 835)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 29)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 832)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 29)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 833)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 29)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 834)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 29)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 835)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 45)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 832)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 45)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 833)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 45)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 834)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 45)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 835)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 61)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 832)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 61)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 833)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 61)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 834)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 61)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 835)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 14)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 896)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 14)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 897)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 14)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 898)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 14)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 899)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 30)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 896)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 30)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 897)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 30)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 898)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 30)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 899)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 46)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 896)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 46)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 897)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 46)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 898)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 46)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 899)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 62)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 896)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 62)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 897)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 62)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 898)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 62)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 899)]));
    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 15)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 960)]));
    C_local_ptr[1] = (C_local_ptr[1] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 15)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 961)]));
    C_local_ptr[2] = (C_local_ptr[2] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 15)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 962)]));
    C_local_ptr[3] = (C_local_ptr[3] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 15)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 963)]));
    C_local_ptr[4] = (C_local_ptr[4] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 31)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 960)]));
    C_local_ptr[5] = (C_local_ptr[5] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 31)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 961)]));
    C_local_ptr[6] = (C_local_ptr[6] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 31)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 962)]));
    C_local_ptr[7] = (C_local_ptr[7] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 31)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 963)]));
    C_local_ptr[8] = (C_local_ptr[8] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 47)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 960)]));
    C_local_ptr[9] = (C_local_ptr[9] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 47)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 961)]));
    C_local_ptr[10] = (C_local_ptr[10] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 47)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 962)]));
    C_local_ptr[11] = (C_local_ptr[11] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 47)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 963)]));
    C_local_ptr[12] = (C_local_ptr[12] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 63)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 960)]));
    C_local_ptr[13] = (C_local_ptr[13] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 63)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 961)]));
    C_local_ptr[14] = (C_local_ptr[14] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 63)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 962)]));
    C_local_ptr[15] = (C_local_ptr[15] + (A_shared_ptr[(((((int)threadIdx.x) >> 4) * 64) + 63)] * B_shared_ptr[(((((int)threadIdx.x) & 15) * 4) + 963)]));
  }
  for (int ax1 = 0; ax1 < 4; ++ax1) {
    for (int ax2 = 0; ax2 < 4; ++ax2) {
      C_ptr[((((((((int)blockIdx.x) >> 4) * 64) + ((((int)threadIdx.x) >> 4) * 4)) + ax1) * 1024) + ((((((int)blockIdx.x) & 15) * 64) + ((((int)threadIdx.x) & 15) * 4)) + ax2))] = C_local_ptr[((ax1 * 4) + ax2)];
    }
  }
}

