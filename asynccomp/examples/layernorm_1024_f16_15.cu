
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

#if !defined(__CUDA_ARCH__) || (__CUDA_ARCH__ >= 530)
#include <cuda_fp16.h>
__device__ half max(half a, half b)
{
  return __hgt(__half(a), __half(b)) ? a : b;
}
__device__ half min(half a, half b)
{
  return __hlt(__half(a), __half(b)) ? a : b;
}
#endif // __CUDA_ARCH__ >= 530

// Pack two half values.
static inline __device__ __host__ unsigned
__pack_half2(const half x, const half y) {
  unsigned v0 = *((unsigned short *)&x);
  unsigned v1 = *((unsigned short *)&y);
  return (v1 << 16) | v0;
}

#define CUDA_UNSUPPORTED_HALF_MATH_BINARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x, half y) {   \
  float tmp_x = __half2float(x);                                          \
  float tmp_y = __half2float(y);                                          \
  float result = FP32_MATH_NAME(tmp_x, tmp_y);                            \
  return __float2half(result);                                            \
}

#define CUDA_UNSUPPORTED_HALF_MATH_UNARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x) {          \
  float tmp_x = __half2float(x);                                         \
  float result = FP32_MATH_NAME(tmp_x);                                  \
  return __float2half(result);                                           \
}

// Some fp16 math functions are not supported in cuda_fp16.h,
// so we define them here to make sure the generated CUDA code
// is valid.
#if defined(__CUDA_ARCH__)
#if (__CUDA_ARCH__ >= 530)
CUDA_UNSUPPORTED_HALF_MATH_BINARY(hpow, powf)
#if ((__CUDACC_VER_MAJOR__ < 12) || ((__CUDACC_VER_MAJOR__ == 12) && (__CUDACC_VER_MINOR__ < 8)))
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)
#endif
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htan, tanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(hatan, atanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(herf, erf)
#else
CUDA_UNSUPPORTED_HALF_MATH_UNARY(hexp, exp)
#endif
#endif

#undef CUDA_UNSUPPORTED_HALF_MATH_BINARY
#undef CUDA_UNSUPPORTED_HALF_MATH_UNARY

template <typename T, typename TVec2>
struct __align__(8) half4_bfloat164 {
  T x, y, z, w;
  __host__ __device__ half4_bfloat164() : x(T(0)), y(T(0)), z(T(0)), w(T(0)) {}
  __host__ __device__ half4_bfloat164(T x, T y, T z, T w) : x(x), y(y), z(z), w(w) {}

};

using half4 = half4_bfloat164<__half, __half2>;
__host__ __device__ half4 make_half4(__half x, __half y, __half z, __half w) {
    return half4(x, y, z, w);
}

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 700)
#define __shfl_sync(mask, var, lane, width) \
        __shfl((var), (lane), (width))

#define __shfl_down_sync(mask, var, offset, width) \
        __shfl_down((var), (offset), (width))

#define __shfl_up_sync(mask, var, offset, width) \
        __shfl_up((var), (offset), (width))
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
extern "C" __global__ void __launch_bounds__(128) main_kernel(half* __restrict__ A_ptr, half* __restrict__ T_layer_norm_ptr, half* __restrict__ beta_ptr, half* __restrict__ gamma_ptr);
extern "C" __global__ void __launch_bounds__(128) main_kernel(half* __restrict__ A_ptr, half* __restrict__ T_layer_norm_ptr, half* __restrict__ beta_ptr, half* __restrict__ gamma_ptr) {
  alignas(64) float red_buf0_0_ptr[1];
  __shared__ alignas(64) float red_buf0_0_1_ptr[4];
  alignas(64) float red_buf1_0_ptr[1];
  __shared__ alignas(64) float red_buf1_0_1_ptr[4];
  __shared__ alignas(64) float A_red_temp_v0_shared_ptr[1];
  __shared__ alignas(64) float A_red_temp_v1_shared_ptr[1];
  alignas(64) float in_thread_A_red_temp_v0_shared_ptr[1];
  alignas(64) float in_thread_A_red_temp_v1_shared_ptr[1];
  in_thread_A_red_temp_v0_shared_ptr[0] = 0x0p+0f/*0.000000e+00*/;
  in_thread_A_red_temp_v1_shared_ptr[0] = 0x0p+0f/*0.000000e+00*/;
  for (int k1_0 = 0; k1_0 < 8; ++k1_0) {
    float v_A_red_temp_v0 = (in_thread_A_red_temp_v0_shared_ptr[0] + ((float)A_ptr[(((((int)blockIdx.x) * 1024) + (k1_0 * 128)) + ((int)threadIdx.x))]));
    float v_A_red_temp_v1 = (in_thread_A_red_temp_v1_shared_ptr[0] + (((float)A_ptr[(((((int)blockIdx.x) * 1024) + (k1_0 * 128)) + ((int)threadIdx.x))]) * ((float)A_ptr[(((((int)blockIdx.x) * 1024) + (k1_0 * 128)) + ((int)threadIdx.x))])));
    in_thread_A_red_temp_v0_shared_ptr[0] = v_A_red_temp_v0;
    in_thread_A_red_temp_v1_shared_ptr[0] = v_A_red_temp_v1;
  }
  alignas(64) float t0_ptr[1];
  alignas(64) float t1_ptr[1];
  alignas(64) uint mask_ptr[1];
  red_buf0_0_ptr[0] = in_thread_A_red_temp_v0_shared_ptr[0];
  red_buf1_0_ptr[0] = in_thread_A_red_temp_v1_shared_ptr[0];
  mask_ptr[0] = __activemask();
  t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_0_ptr[0], 16, 32);
  red_buf0_0_ptr[0] = (red_buf0_0_ptr[0] + t0_ptr[0]);
  t1_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf1_0_ptr[0], 16, 32);
  red_buf1_0_ptr[0] = (red_buf1_0_ptr[0] + t1_ptr[0]);
  t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_0_ptr[0], 8, 32);
  red_buf0_0_ptr[0] = (red_buf0_0_ptr[0] + t0_ptr[0]);
  t1_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf1_0_ptr[0], 8, 32);
  red_buf1_0_ptr[0] = (red_buf1_0_ptr[0] + t1_ptr[0]);
  t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_0_ptr[0], 4, 32);
  red_buf0_0_ptr[0] = (red_buf0_0_ptr[0] + t0_ptr[0]);
  t1_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf1_0_ptr[0], 4, 32);
  red_buf1_0_ptr[0] = (red_buf1_0_ptr[0] + t1_ptr[0]);
  t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_0_ptr[0], 2, 32);
  red_buf0_0_ptr[0] = (red_buf0_0_ptr[0] + t0_ptr[0]);
  t1_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf1_0_ptr[0], 2, 32);
  red_buf1_0_ptr[0] = (red_buf1_0_ptr[0] + t1_ptr[0]);
  t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_0_ptr[0], 1, 32);
  red_buf0_0_ptr[0] = (red_buf0_0_ptr[0] + t0_ptr[0]);
  t1_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf1_0_ptr[0], 1, 32);
  red_buf1_0_ptr[0] = (red_buf1_0_ptr[0] + t1_ptr[0]);
  red_buf0_0_ptr[0] = __shfl_sync(mask_ptr[0], red_buf0_0_ptr[0], 0, 32);
  red_buf1_0_ptr[0] = __shfl_sync(mask_ptr[0], red_buf1_0_ptr[0], 0, 32);
  if ((((int)threadIdx.x) % 32) == 0) {
    red_buf0_0_1_ptr[(((int)threadIdx.x) >> 5)] = red_buf0_0_ptr[0];
    red_buf1_0_1_ptr[(((int)threadIdx.x) >> 5)] = red_buf1_0_ptr[0];
  }
  __syncthreads();
  if (((int)threadIdx.x) < 32) {
    if (((int)threadIdx.x) < 4) {
      red_buf0_0_ptr[0] = red_buf0_0_1_ptr[((int)threadIdx.x)];
      red_buf1_0_ptr[0] = red_buf1_0_1_ptr[((int)threadIdx.x)];
    }
    mask_ptr[0] = (__activemask() & ((uint)15));
    t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_0_ptr[0], 2, 32);
    red_buf0_0_ptr[0] = (red_buf0_0_ptr[0] + t0_ptr[0]);
    t1_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf1_0_ptr[0], 2, 32);
    red_buf1_0_ptr[0] = (red_buf1_0_ptr[0] + t1_ptr[0]);
    t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_0_ptr[0], 1, 32);
    red_buf0_0_ptr[0] = (red_buf0_0_ptr[0] + t0_ptr[0]);
    t1_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf1_0_ptr[0], 1, 32);
    red_buf1_0_ptr[0] = (red_buf1_0_ptr[0] + t1_ptr[0]);
    red_buf0_0_ptr[0] = __shfl_sync(mask_ptr[0], red_buf0_0_ptr[0], 0, 32);
    red_buf1_0_ptr[0] = __shfl_sync(mask_ptr[0], red_buf1_0_ptr[0], 0, 32);
  }
  if (((int)threadIdx.x) == 0) {
    A_red_temp_v0_shared_ptr[0] = red_buf0_0_ptr[0];
    A_red_temp_v1_shared_ptr[0] = red_buf1_0_ptr[0];
  }
  __syncthreads();
  for (int ax1_0 = 0; ax1_0 < 8; ++ax1_0) {
    T_layer_norm_ptr[((((int)blockIdx.x) * 1024) + ((ax1_0 * 128) + ((int)threadIdx.x)))] = ((half)(((((((float)A_ptr[((((int)blockIdx.x) * 1024) + ((ax1_0 * 128) + ((int)threadIdx.x)))]) - (A_red_temp_v0_shared_ptr[0] * 0x1p-10f/*9.765625e-04*/)) * rsqrtf((((A_red_temp_v1_shared_ptr[0] * 0x1p-10f/*9.765625e-04*/) - ((A_red_temp_v0_shared_ptr[0] * 0x1p-10f/*9.765625e-04*/) * (A_red_temp_v0_shared_ptr[0] * 0x1p-10f/*9.765625e-04*/))) + 0x1.4f8b588e368f1p-17f/*1.000000e-05*/))) * ((float)gamma_ptr[((ax1_0 * 128) + ((int)threadIdx.x))])) + ((float)beta_ptr[((ax1_0 * 128) + ((int)threadIdx.x))]))));
  }
}

