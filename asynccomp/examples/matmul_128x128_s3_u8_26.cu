
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
__forceinline__ __device__ unsigned int
cast_smem_ptr_to_int(const void* const smem_ptr)
{
  unsigned int smem_int;
  asm volatile ("{ .reg .u64 smem_int; cvta.to.shared.u64 smem_int, %1; cvt.u32.u64 %0, smem_int; }"
    : "=r"(smem_int) : "l"(smem_ptr));
  return smem_int;
}
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_wait_group_async_wait_group_0() {
  asm volatile("cp.async.wait_group 0;" :  :  : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_wait_group_async_wait_group_1() {
  asm volatile("cp.async.wait_group 1;" :  :  : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_wait_group_async_wait_group_2() {
  asm volatile("cp.async.wait_group 2;" :  :  : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_commit_group_async_commit_group() {
  asm volatile("cp.async.commit_group;" :  : );
}
extern "C" __global__ void __launch_bounds__(256) main_kernel(float* __restrict__ A_ptr, float* __restrict__ B_ptr, float* __restrict__ C_ptr);
extern "C" __global__ void __launch_bounds__(256) main_kernel(float* __restrict__ A_ptr, float* __restrict__ B_ptr, float* __restrict__ C_ptr) {
  alignas(64) float C_local_ptr[64];
  __shared__ alignas(64) float A_shared_ptr[6144];
  __shared__ alignas(64) float B_shared_ptr[6144];
  for (int i_3_init = 0; i_3_init < 8; ++i_3_init) {
    for (int j_3_init = 0; j_3_init < 8; ++j_3_init) {
      C_local_ptr[((i_3_init * 8) + j_3_init)] = 0x0p+0f/*0.000000e+00*/;
    }
  }
  int cse_v1 = ((((int)blockIdx.x) >> 4) * 262144);
  int cse_v2 = ((((int)blockIdx.x) & 15) * 128);
  for (int ax0_ax1_fused_0_a_0 = 0; ax0_ax1_fused_0_a_0 < 2; ++ax0_ax1_fused_0_a_0) {

  {
    unsigned int addr = cast_smem_ptr_to_int(A_shared_ptr + ((ax0_ax1_fused_0_a_0 * 1024) + (((int)threadIdx.x) * 4)));
    __asm__ __volatile__(
      #if TVM_ENABLE_L2_PREFETCH
        "cp.async.cg.shared.global.L2::128B [%0], [%1], %2;"
      #else
        "cp.async.cg.shared.global [%0], [%1], %2;"
      #endif
        :: "r"(addr), "l"((void*)(A_ptr + ((((((int)blockIdx.x) >> 4) * 262144) + ((((ax0_ax1_fused_0_a_0 * 1024) + (((int)threadIdx.x) * 4)) >> 4) * 2048)) + (((ax0_ax1_fused_0_a_0 * 1024) + (((int)threadIdx.x) * 4)) & 15)))), "n"(16)
    );
  }
  }
  for (int ax0_ax1_fused_0_b_0 = 0; ax0_ax1_fused_0_b_0 < 2; ++ax0_ax1_fused_0_b_0) {

  {
    unsigned int addr = cast_smem_ptr_to_int(B_shared_ptr + ((ax0_ax1_fused_0_b_0 * 1024) + (((int)threadIdx.x) * 4)));
    __asm__ __volatile__(
      #if TVM_ENABLE_L2_PREFETCH
        "cp.async.cg.shared.global.L2::128B [%0], [%1], %2;"
      #else
        "cp.async.cg.shared.global [%0], [%1], %2;"
      #endif
        :: "r"(addr), "l"((void*)(B_ptr + ((((((int)blockIdx.x) & 15) * 128) + ((((ax0_ax1_fused_0_b_0 * 1024) + (((int)threadIdx.x) * 4)) >> 7) * 2048)) + (((ax0_ax1_fused_0_b_0 * 1024) + (((int)threadIdx.x) * 4)) & 127)))), "n"(16)
    );
  }
  }
  tvm_builtin_ptx_cp_async_commit_group_async_commit_group();
  for (int ax0_ax1_fused_0_a_1 = 0; ax0_ax1_fused_0_a_1 < 2; ++ax0_ax1_fused_0_a_1) {

  {
    unsigned int addr = cast_smem_ptr_to_int(A_shared_ptr + (((ax0_ax1_fused_0_a_1 * 1024) + (((int)threadIdx.x) * 4)) + 2048));
    __asm__ __volatile__(
      #if TVM_ENABLE_L2_PREFETCH
        "cp.async.cg.shared.global.L2::128B [%0], [%1], %2;"
      #else
        "cp.async.cg.shared.global [%0], [%1], %2;"
      #endif
        :: "r"(addr), "l"((void*)(A_ptr + (((((((int)blockIdx.x) >> 4) * 262144) + 16) + ((((ax0_ax1_fused_0_a_1 * 1024) + (((int)threadIdx.x) * 4)) >> 4) * 2048)) + (((ax0_ax1_fused_0_a_1 * 1024) + (((int)threadIdx.x) * 4)) & 15)))), "n"(16)
    );
  }
  }
  for (int ax0_ax1_fused_0_b_1 = 0; ax0_ax1_fused_0_b_1 < 2; ++ax0_ax1_fused_0_b_1) {

  {
    unsigned int addr = cast_smem_ptr_to_int(B_shared_ptr + (((ax0_ax1_fused_0_b_1 * 1024) + (((int)threadIdx.x) * 4)) + 2048));
    __asm__ __volatile__(
      #if TVM_ENABLE_L2_PREFETCH
        "cp.async.cg.shared.global.L2::128B [%0], [%1], %2;"
      #else
        "cp.async.cg.shared.global [%0], [%1], %2;"
      #endif
        :: "r"(addr), "l"((void*)(B_ptr + (((((((int)blockIdx.x) & 15) * 128) + 32768) + ((((ax0_ax1_fused_0_b_1 * 1024) + (((int)threadIdx.x) * 4)) >> 7) * 2048)) + (((ax0_ax1_fused_0_b_1 * 1024) + (((int)threadIdx.x) * 4)) & 127)))), "n"(16)
    );
  }
  }
  tvm_builtin_ptx_cp_async_commit_group_async_commit_group();
  for (int k_0_fused = 0; k_0_fused < 126; ++k_0_fused) {
    int cse_v3 = ((k_0_fused + 2) % 3);
    __syncthreads();
    for (int ax0_ax1_fused_0_a_2 = 0; ax0_ax1_fused_0_a_2 < 2; ++ax0_ax1_fused_0_a_2) {

  {
    unsigned int addr = cast_smem_ptr_to_int(A_shared_ptr + ((((k_0_fused + 2) % 3) * 2048) + ((ax0_ax1_fused_0_a_2 * 1024) + (((int)threadIdx.x) * 4))));
    __asm__ __volatile__(
      #if TVM_ENABLE_L2_PREFETCH
        "cp.async.cg.shared.global.L2::128B [%0], [%1], %2;"
      #else
        "cp.async.cg.shared.global [%0], [%1], %2;"
      #endif
        :: "r"(addr), "l"((void*)(A_ptr + (((((((int)blockIdx.x) >> 4) * 262144) + ((k_0_fused + 2) * 16)) + ((((ax0_ax1_fused_0_a_2 * 1024) + (((int)threadIdx.x) * 4)) >> 4) * 2048)) + (((ax0_ax1_fused_0_a_2 * 1024) + (((int)threadIdx.x) * 4)) & 15)))), "n"(16)
    );
  }
    }
    for (int ax0_ax1_fused_0_b_2 = 0; ax0_ax1_fused_0_b_2 < 2; ++ax0_ax1_fused_0_b_2) {

  {
    unsigned int addr = cast_smem_ptr_to_int(B_shared_ptr + ((((k_0_fused + 2) % 3) * 2048) + ((ax0_ax1_fused_0_b_2 * 1024) + (((int)threadIdx.x) * 4))));
    __asm__ __volatile__(
      #if TVM_ENABLE_L2_PREFETCH
        "cp.async.cg.shared.global.L2::128B [%0], [%1], %2;"
      #else
        "cp.async.cg.shared.global [%0], [%1], %2;"
      #endif
        :: "r"(addr), "l"((void*)(B_ptr + (((((((int)blockIdx.x) & 15) * 128) + ((k_0_fused + 2) * 32768)) + ((((ax0_ax1_fused_0_b_2 * 1024) + (((int)threadIdx.x) * 4)) >> 7) * 2048)) + (((ax0_ax1_fused_0_b_2 * 1024) + (((int)threadIdx.x) * 4)) & 127)))), "n"(16)
    );
  }
    }
    tvm_builtin_ptx_cp_async_commit_group_async_commit_group();
    tvm_builtin_ptx_cp_async_wait_group_async_wait_group_2();
    __syncthreads();
    for (int k_1 = 0; k_1 < 2; ++k_1) {
      #pragma unroll
      for (int i_3 = 0; i_3 < 8; ++i_3) {
        #pragma unroll
        for (int j_3 = 0; j_3 < 8; ++j_3) {
          C_local_ptr[((i_3 * 8) + j_3)] = (C_local_ptr[((i_3 * 8) + j_3)] + (A_shared_ptr[(((((k_0_fused % 3) * 2048) + ((((int)threadIdx.x) >> 4) * 128)) + (i_3 * 16)) + (k_1 * 8))] * B_shared_ptr[(((((k_0_fused % 3) * 2048) + ((k_1 * 8) * 128)) + ((((int)threadIdx.x) & 15) * 8)) + j_3)]));
          C_local_ptr[((i_3 * 8) + j_3)] = (C_local_ptr[((i_3 * 8) + j_3)] + (A_shared_ptr[(((((k_0_fused % 3) * 2048) + ((((int)threadIdx.x) >> 4) * 128)) + (i_3 * 16)) + ((k_1 * 8) + 1))] * B_shared_ptr[(((((k_0_fused % 3) * 2048) + (((k_1 * 8) + 1) * 128)) + ((((int)threadIdx.x) & 15) * 8)) + j_3)]));
          C_local_ptr[((i_3 * 8) + j_3)] = (C_local_ptr[((i_3 * 8) + j_3)] + (A_shared_ptr[(((((k_0_fused % 3) * 2048) + ((((int)threadIdx.x) >> 4) * 128)) + (i_3 * 16)) + ((k_1 * 8) + 2))] * B_shared_ptr[(((((k_0_fused % 3) * 2048) + (((k_1 * 8) + 2) * 128)) + ((((int)threadIdx.x) & 15) * 8)) + j_3)]));
          C_local_ptr[((i_3 * 8) + j_3)] = (C_local_ptr[((i_3 * 8) + j_3)] + (A_shared_ptr[(((((k_0_fused % 3) * 2048) + ((((int)threadIdx.x) >> 4) * 128)) + (i_3 * 16)) + ((k_1 * 8) + 3))] * B_shared_ptr[(((((k_0_fused % 3) * 2048) + (((k_1 * 8) + 3) * 128)) + ((((int)threadIdx.x) & 15) * 8)) + j_3)]));
          C_local_ptr[((i_3 * 8) + j_3)] = (C_local_ptr[((i_3 * 8) + j_3)] + (A_shared_ptr[(((((k_0_fused % 3) * 2048) + ((((int)threadIdx.x) >> 4) * 128)) + (i_3 * 16)) + ((k_1 * 8) + 4))] * B_shared_ptr[(((((k_0_fused % 3) * 2048) + (((k_1 * 8) + 4) * 128)) + ((((int)threadIdx.x) & 15) * 8)) + j_3)]));
          C_local_ptr[((i_3 * 8) + j_3)] = (C_local_ptr[((i_3 * 8) + j_3)] + (A_shared_ptr[(((((k_0_fused % 3) * 2048) + ((((int)threadIdx.x) >> 4) * 128)) + (i_3 * 16)) + ((k_1 * 8) + 5))] * B_shared_ptr[(((((k_0_fused % 3) * 2048) + (((k_1 * 8) + 5) * 128)) + ((((int)threadIdx.x) & 15) * 8)) + j_3)]));
          C_local_ptr[((i_3 * 8) + j_3)] = (C_local_ptr[((i_3 * 8) + j_3)] + (A_shared_ptr[(((((k_0_fused % 3) * 2048) + ((((int)threadIdx.x) >> 4) * 128)) + (i_3 * 16)) + ((k_1 * 8) + 6))] * B_shared_ptr[(((((k_0_fused % 3) * 2048) + (((k_1 * 8) + 6) * 128)) + ((((int)threadIdx.x) & 15) * 8)) + j_3)]));
          C_local_ptr[((i_3 * 8) + j_3)] = (C_local_ptr[((i_3 * 8) + j_3)] + (A_shared_ptr[(((((k_0_fused % 3) * 2048) + ((((int)threadIdx.x) >> 4) * 128)) + (i_3 * 16)) + ((k_1 * 8) + 7))] * B_shared_ptr[(((((k_0_fused % 3) * 2048) + (((k_1 * 8) + 7) * 128)) + ((((int)threadIdx.x) & 15) * 8)) + j_3)]));
        }
      }
    }
  }
  tvm_builtin_ptx_cp_async_wait_group_async_wait_group_1();
  __syncthreads();
  for (int k_1_1 = 0; k_1_1 < 2; ++k_1_1) {
    #pragma unroll
    for (int i_3_1 = 0; i_3_1 < 8; ++i_3_1) {
      #pragma unroll
      for (int j_3_1 = 0; j_3_1 < 8; ++j_3_1) {
        C_local_ptr[((i_3_1 * 8) + j_3_1)] = (C_local_ptr[((i_3_1 * 8) + j_3_1)] + (A_shared_ptr[((((((int)threadIdx.x) >> 4) * 128) + (i_3_1 * 16)) + (k_1_1 * 8))] * B_shared_ptr[((((k_1_1 * 8) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_1)]));
        C_local_ptr[((i_3_1 * 8) + j_3_1)] = (C_local_ptr[((i_3_1 * 8) + j_3_1)] + (A_shared_ptr[((((((int)threadIdx.x) >> 4) * 128) + (i_3_1 * 16)) + ((k_1_1 * 8) + 1))] * B_shared_ptr[(((((k_1_1 * 8) + 1) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_1)]));
        C_local_ptr[((i_3_1 * 8) + j_3_1)] = (C_local_ptr[((i_3_1 * 8) + j_3_1)] + (A_shared_ptr[((((((int)threadIdx.x) >> 4) * 128) + (i_3_1 * 16)) + ((k_1_1 * 8) + 2))] * B_shared_ptr[(((((k_1_1 * 8) + 2) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_1)]));
        C_local_ptr[((i_3_1 * 8) + j_3_1)] = (C_local_ptr[((i_3_1 * 8) + j_3_1)] + (A_shared_ptr[((((((int)threadIdx.x) >> 4) * 128) + (i_3_1 * 16)) + ((k_1_1 * 8) + 3))] * B_shared_ptr[(((((k_1_1 * 8) + 3) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_1)]));
        C_local_ptr[((i_3_1 * 8) + j_3_1)] = (C_local_ptr[((i_3_1 * 8) + j_3_1)] + (A_shared_ptr[((((((int)threadIdx.x) >> 4) * 128) + (i_3_1 * 16)) + ((k_1_1 * 8) + 4))] * B_shared_ptr[(((((k_1_1 * 8) + 4) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_1)]));
        C_local_ptr[((i_3_1 * 8) + j_3_1)] = (C_local_ptr[((i_3_1 * 8) + j_3_1)] + (A_shared_ptr[((((((int)threadIdx.x) >> 4) * 128) + (i_3_1 * 16)) + ((k_1_1 * 8) + 5))] * B_shared_ptr[(((((k_1_1 * 8) + 5) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_1)]));
        C_local_ptr[((i_3_1 * 8) + j_3_1)] = (C_local_ptr[((i_3_1 * 8) + j_3_1)] + (A_shared_ptr[((((((int)threadIdx.x) >> 4) * 128) + (i_3_1 * 16)) + ((k_1_1 * 8) + 6))] * B_shared_ptr[(((((k_1_1 * 8) + 6) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_1)]));
        C_local_ptr[((i_3_1 * 8) + j_3_1)] = (C_local_ptr[((i_3_1 * 8) + j_3_1)] + (A_shared_ptr[((((((int)threadIdx.x) >> 4) * 128) + (i_3_1 * 16)) + ((k_1_1 * 8) + 7))] * B_shared_ptr[(((((k_1_1 * 8) + 7) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_1)]));
      }
    }
  }
  tvm_builtin_ptx_cp_async_wait_group_async_wait_group_0();
  __syncthreads();
  for (int k_1_2 = 0; k_1_2 < 2; ++k_1_2) {
    #pragma unroll
    for (int i_3_2 = 0; i_3_2 < 8; ++i_3_2) {
      #pragma unroll
      for (int j_3_2 = 0; j_3_2 < 8; ++j_3_2) {
        C_local_ptr[((i_3_2 * 8) + j_3_2)] = (C_local_ptr[((i_3_2 * 8) + j_3_2)] + (A_shared_ptr[(((((((int)threadIdx.x) >> 4) * 128) + (i_3_2 * 16)) + (k_1_2 * 8)) + 2048)] * B_shared_ptr[(((((k_1_2 * 8) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_2) + 2048)]));
        C_local_ptr[((i_3_2 * 8) + j_3_2)] = (C_local_ptr[((i_3_2 * 8) + j_3_2)] + (A_shared_ptr[(((((((int)threadIdx.x) >> 4) * 128) + (i_3_2 * 16)) + ((k_1_2 * 8) + 1)) + 2048)] * B_shared_ptr[((((((k_1_2 * 8) + 1) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_2) + 2048)]));
        C_local_ptr[((i_3_2 * 8) + j_3_2)] = (C_local_ptr[((i_3_2 * 8) + j_3_2)] + (A_shared_ptr[(((((((int)threadIdx.x) >> 4) * 128) + (i_3_2 * 16)) + ((k_1_2 * 8) + 2)) + 2048)] * B_shared_ptr[((((((k_1_2 * 8) + 2) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_2) + 2048)]));
        C_local_ptr[((i_3_2 * 8) + j_3_2)] = (C_local_ptr[((i_3_2 * 8) + j_3_2)] + (A_shared_ptr[(((((((int)threadIdx.x) >> 4) * 128) + (i_3_2 * 16)) + ((k_1_2 * 8) + 3)) + 2048)] * B_shared_ptr[((((((k_1_2 * 8) + 3) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_2) + 2048)]));
        C_local_ptr[((i_3_2 * 8) + j_3_2)] = (C_local_ptr[((i_3_2 * 8) + j_3_2)] + (A_shared_ptr[(((((((int)threadIdx.x) >> 4) * 128) + (i_3_2 * 16)) + ((k_1_2 * 8) + 4)) + 2048)] * B_shared_ptr[((((((k_1_2 * 8) + 4) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_2) + 2048)]));
        C_local_ptr[((i_3_2 * 8) + j_3_2)] = (C_local_ptr[((i_3_2 * 8) + j_3_2)] + (A_shared_ptr[(((((((int)threadIdx.x) >> 4) * 128) + (i_3_2 * 16)) + ((k_1_2 * 8) + 5)) + 2048)] * B_shared_ptr[((((((k_1_2 * 8) + 5) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_2) + 2048)]));
        C_local_ptr[((i_3_2 * 8) + j_3_2)] = (C_local_ptr[((i_3_2 * 8) + j_3_2)] + (A_shared_ptr[(((((((int)threadIdx.x) >> 4) * 128) + (i_3_2 * 16)) + ((k_1_2 * 8) + 6)) + 2048)] * B_shared_ptr[((((((k_1_2 * 8) + 6) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_2) + 2048)]));
        C_local_ptr[((i_3_2 * 8) + j_3_2)] = (C_local_ptr[((i_3_2 * 8) + j_3_2)] + (A_shared_ptr[(((((((int)threadIdx.x) >> 4) * 128) + (i_3_2 * 16)) + ((k_1_2 * 8) + 7)) + 2048)] * B_shared_ptr[((((((k_1_2 * 8) + 7) * 128) + ((((int)threadIdx.x) & 15) * 8)) + j_3_2) + 2048)]));
      }
    }
  }
  for (int ax1 = 0; ax1 < 8; ++ax1) {
    for (int ax2 = 0; ax2 < 8; ++ax2) {
      C_ptr[((((((((int)blockIdx.x) >> 4) * 128) + ((((int)threadIdx.x) >> 4) * 8)) + ax1) * 2048) + ((((((int)blockIdx.x) & 15) * 128) + ((((int)threadIdx.x) & 15) * 8)) + ax2))] = C_local_ptr[((ax1 * 8) + ax2)];
    }
  }
}

