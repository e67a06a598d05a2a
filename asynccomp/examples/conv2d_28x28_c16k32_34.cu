
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
extern "C" __global__ void __launch_bounds__(448) main_kernel(float* __restrict__ conv2d_nhwc_ptr, float* __restrict__ inputs_ptr, float* __restrict__ weight_ptr);
extern "C" __global__ void __launch_bounds__(448) main_kernel(float* __restrict__ conv2d_nhwc_ptr, float* __restrict__ inputs_ptr, float* __restrict__ weight_ptr) {
  alignas(64) float conv2d_nhwc_local_ptr[8];
  __shared__ alignas(64) float PadInput_shared_ptr[720];
  __shared__ alignas(64) float weight_shared_ptr[1152];
  for (int co_4_init = 0; co_4_init < 8; ++co_4_init) {
    conv2d_nhwc_local_ptr[co_4_init] = 0x0p+0f/*0.000000e+00*/;
  }
  int cse_v1 = (((int)blockIdx.x) * 4);
  int cse_v2 = 0;
  for (int rc_0 = 0; rc_0 < 4; ++rc_0) {
    __syncthreads();
    for (int ax0_ax1_ax2_fused_0 = 0; ax0_ax1_ax2_fused_0 < 2; ++ax0_ax1_ax2_fused_0) {
      if (((ax0_ax1_ax2_fused_0 * 448) + ((int)threadIdx.x)) < 720) {
        float condval;
        if ((((0 <= (((((int)blockIdx.x) * 4) + (((ax0_ax1_ax2_fused_0 * 448) + ((int)threadIdx.x)) / 120)) - 1)) && ((((((int)blockIdx.x) * 4) + (((ax0_ax1_ax2_fused_0 * 448) + ((int)threadIdx.x)) / 120)) - 1) < 28)) && (0 <= (((((ax0_ax1_ax2_fused_0 * 448) + ((int)threadIdx.x)) >> 2) % 30) - 1))) && ((((((ax0_ax1_ax2_fused_0 * 448) + ((int)threadIdx.x)) >> 2) % 30) - 1) < 28)) {
          condval = inputs_ptr[(((((((((int)blockIdx.x) * 4) + (((ax0_ax1_ax2_fused_0 * 448) + ((int)threadIdx.x)) / 120)) - 1) * 448) + ((((((ax0_ax1_ax2_fused_0 * 448) + ((int)threadIdx.x)) >> 2) % 30) - 1) * 16)) + (rc_0 * 4)) + (((ax0_ax1_ax2_fused_0 * 448) + ((int)threadIdx.x)) & 3))];
        }
        else {
          condval = 0x0p+0f/*0.000000e+00*/;
        }
        PadInput_shared_ptr[((ax0_ax1_ax2_fused_0 * 448) + ((int)threadIdx.x))] = condval;
      }
    }
    for (int ax0_ax1_ax2_ax3_fused_0 = 0; ax0_ax1_ax2_ax3_fused_0 < 3; ++ax0_ax1_ax2_ax3_fused_0) {
      if (((ax0_ax1_ax2_ax3_fused_0 * 448) + ((int)threadIdx.x)) < 1152) {
        weight_shared_ptr[((ax0_ax1_ax2_ax3_fused_0 * 448) + ((int)threadIdx.x))] = weight_ptr[(((((((ax0_ax1_ax2_ax3_fused_0 * 448) + ((int)threadIdx.x)) >> 7) * 512) + (rc_0 * 128)) + (((((ax0_ax1_ax2_ax3_fused_0 * 448) + ((int)threadIdx.x)) >> 5) & 3) * 32)) + (((ax0_ax1_ax2_ax3_fused_0 * 448) + ((int)threadIdx.x)) & 31))];
      }
    }
    __syncthreads();
    for (int rc_1 = 0; rc_1 < 4; ++rc_1) {
      for (int rh_2 = 0; rh_2 < 3; ++rh_2) {
        #pragma unroll
        for (int rw_2 = 0; rw_2 < 3; ++rw_2) {
          #pragma unroll
          for (int co_4 = 0; co_4 < 8; ++co_4) {
            conv2d_nhwc_local_ptr[co_4] = (conv2d_nhwc_local_ptr[co_4] + (PadInput_shared_ptr[((((((((int)threadIdx.x) >> 2) / 28) + rh_2) * 120) + ((((((int)threadIdx.x) >> 2) % 28) + rw_2) * 4)) + rc_1)] * weight_shared_ptr[(((((rh_2 * 384) + (rw_2 * 128)) + (rc_1 * 32)) + ((((int)threadIdx.x) & 3) * 8)) + co_4)]));
          }
        }
      }
    }
  }
  for (int ax3 = 0; ax3 < 8; ++ax3) {
    conv2d_nhwc_ptr[((((((((int)blockIdx.x) * 4) + ((((int)threadIdx.x) >> 2) / 28)) * 896) + (((((int)threadIdx.x) >> 2) % 28) * 32)) + ((((int)threadIdx.x) & 3) * 8)) + ax3)] = conv2d_nhwc_local_ptr[ax3];
  }
}

