// cub_bench.cu -- CUB comparator for the GPU reduction benchmarks.
//
// Build:  nvcc -O3 -std=c++17 -arch=sm_90 -o cub_bench cub_bench.cu
// Usage:  cub_bench <op> <n> [<n> ...]
//
// Ops:
//   sum_f32, max_f32, min_f32   cub::DeviceReduce::Sum / Max / Min over float
//   sum_f32_gpu_to_gpu          cub::DeviceReduce::Sum through the env API with
//                               require(determinism::gpu_to_gpu); needs CCCL >= 3.6 headers (-I the
//                               cuda-cccl 1.2.1 wheel's cuda/cccl/headers/include); temporary storage
//                               allocated once through an env memory resource (see OnceResource)
//   argmax_f32, argmin_f32      cub::DeviceReduce::ArgMax / ArgMin (CCCL 3 API with separate
//                               value and int64 index outputs)
//   sum_f16, sum_bf16           cub::DeviceReduce::TransformReduce, half -> float, f32 accumulator
//   absmax_f32                  cub::DeviceReduce::TransformReduce, |x| and a NaN-propagating max
//   sum_squares_f32             cub::DeviceReduce::TransformReduce, x * x and plus, f32 accumulator
//   welford_f32                 cub::DeviceReduce::TransformReduce, x -> {n, mean, M2} in double, Chan's merge
//                               (the custom-op example's AbsMax, SumSquares and Welford; benches/custom.rs)
//   histogram_f32_uniform       cub::DeviceHistogram::HistogramEven, 256 bins over [0,1)
//   histogram_f32_skewed        same, ~90% of the samples fall into one bin
//   select_if_f32               cub::DeviceSelect::If with predicate x > 0.5f
//   select_flagged_f32          cub::DeviceSelect::Flagged, one flag byte per element set where x > 0.5f
//                               (the flags are made on the device in setup, one set per input copy)
//   topk_<dist>_k<k>            cub::DeviceTopK::MaxPairs (keys and uint32 indices), unordered and
//                               non-deterministic (the one mode CCCL 3.6 implements; needs its headers, as
//                               sum_f32_gpu_to_gpu), on <dist> = uniform, normal (N(0, 1)), bits (random bit
//                               patterns), equal, distinct16 (the integers 0-15), ascending, descending, nan1
//                               (uniform with 1 % NaN); checked to be k elements of the input, the greatest
//   batched_topk_c<cols>_k<k>   cub::DeviceBatchedTopK::MaxPairs over the rows of an n / cols x cols N(0, 1)
//                               matrix (k <= 1024 per row; needs CCCL >= 3.6 headers), in its closest mode to
//                               this library's: gpu_to_gpu, ties to the smaller index, sorted; rows 0, 1 and
//                               the last checked against a CPU sort
//   memcpy_d2d                  cudaMemcpyAsync device -> device
//   read_f32                    hand-written float4 grid-stride read+sum kernel (bandwidth ceiling)
//   loop_<op>                   <op> (any of the above) in the loop a plain user writes: launched back to
//                               back on one stream, no graph and no spin kernel ahead, one event pair around
//                               2000 launches; the median per launch of 11 such loops after 500 warm-up
//                               launches (the host's launch rate counts where it is slower than the GPU)
//
// Output: for each n exactly one CSV line on stdout, nothing else:
//   cub,<op>,<n>,<median_us>,<gbps>,<check>
// where gbps = bytes / median time (1 GB = 1e9 bytes), bytes = n * sizeof(input element), except
// memcpy_d2d (2 * n * 4: read + write), select_if_f32 (n * 4 + 4 * number selected) and
// select_flagged_f32 (n * 5 + 4 * number selected).
// <check> is PASS or FAIL. Diagnostics go to stderr. Exit code: 0 if every check passed, 1 if a
// check failed or a CUDA call failed (file:line and the error string are printed to stderr),
// 2 on a usage error. n > INT32_MAX is skipped (a note on stderr, no CSV line).
//
// Method:
//   * Inputs are random (never all zeros): a splitmix64 hash of (seed, index) gives uniform floats
//     in [0,1), generated on the device; argmax/argmin plant a unique extreme (2.0 / -1.0) at a
//     random index; the skewed histogram puts ~90% of the samples into one bin.
//   * Rotation: K copies of the input (different seeds) with K * bytes >= 3 * L2 size (K = 1 when
//     one input is already larger; total rotation memory capped at 8 GiB; the graph path uses at
//     most 64 * 100 copies). Each timed launch uses the next copy in turn, so the timed reads
//     come from HBM, not from L2.
//   * CUB temporary storage is queried and allocated once, outside the timing.
//   * Warm-up: at least 5 launches and at least 50 ms of work before timing.
//   * n <= 2^20: CUDA graphs (stream capture) of 100 launches each, cycling through the copies;
//     a graph replay is timed with a cudaEvent pair and divided by 100; the result is the
//     median over 21 replays.
//   * n > 2^20: one cudaEvent pair around each launch; the result is the median over
//     max(21, enough launches for ~0.3 s) launches (capped at 100000).
//   * Before every timed replay / chunk of timed launches a short GPU spin kernel is enqueued so
//     that the host can enqueue the work ahead of the GPU; the events then measure GPU time only,
//     not host launch overhead.
//   * Correctness: after timing, the output of the last timed launch is checked against a CPU
//     reference computed in double on the copy that launch read (sum f32: |gpu-ref| <= 1e-5 *
//     sum|x| + 1e-6; f16/bf16: 1e-3 relative; max/min/argmax/argmin/histogram/select: exact;
//     absmax: exact; sum_squares: 1e-5 * sum x^2 + 1e-6; welford: count exact, mean and variance 1e-9
//     relative to a two-pass double reference).

// DeviceBatchedTopK serves deterministic requests only on its sm_90+ cluster backend; without this, the
// dispatch's policies for older architectures, instantiated too, fail to compile instead of returning
// cudaErrorNotSupported there.
#define CUB_DISABLE_TOPK_UNSUPPORTED_ARCH_ASSERT
#include <cub/cub.cuh>
#if __has_include(<cub/device/device_topk.cuh>)
#  include <cub/device/device_topk.cuh>
#  include <cuda/iterator>
#endif
#if __has_include(<cub/device/device_batched_topk.cuh>)
#  include <cub/device/device_batched_topk.cuh>
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Error handling: every CUDA call goes through CK(); any failure is fatal (exit code 1).
// ---------------------------------------------------------------------------------------------
static void check_cuda(cudaError_t err, const char* what, const char* file, int line)
{
  if (err != cudaSuccess)
  {
    std::fprintf(stderr, "%s:%d: CUDA error in %s: %s (%s)\n", file, line, what, cudaGetErrorString(err),
                 cudaGetErrorName(err));
    std::exit(1);
  }
}
#define CK(call) check_cuda((call), #call, __FILE__, __LINE__)

namespace {

constexpr int kLaunchesPerGraph       = 100;
constexpr int kGraphReplays           = 21;
constexpr int kMaxGraphs              = 64;
constexpr size_t kGraphMaxN           = size_t(1) << 20;
constexpr int kMinTimedLaunches       = 21;
constexpr int kMaxTimedLaunches       = 100000;
constexpr int kEventChunk             = 256;
constexpr double kWarmupMs            = 50.0;
constexpr double kTargetTimedMs       = 300.0;
constexpr size_t kMaxRotationBytes    = size_t(8) << 30;
constexpr size_t kCopyAlignBytes      = 256;
constexpr int kHistBins               = 256;
constexpr int kHotBin                 = 77; // the bin that receives ~90% of the skewed samples
constexpr float kSelectThreshold      = 0.5f;
constexpr int kReadBlock              = 256;
constexpr int kReadUnroll             = 4;

// ---------------------------------------------------------------------------------------------
// Random input generation (device side; the hash functions are shared with the host).
// ---------------------------------------------------------------------------------------------
__host__ __device__ inline uint64_t splitmix64(uint64_t x)
{
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform float in [0,1) from the top 24 bits of a hash.
__host__ __device__ inline float unit_float(uint64_t h)
{
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

__host__ __device__ inline uint64_t copy_seed(uint64_t base, uint64_t copy)
{
  return splitmix64(base ^ (0x632BE59BD9B4E019ull * (copy + 1)));
}

__host__ __device__ inline uint64_t plant_index(uint64_t seed, uint64_t n)
{
  return splitmix64(seed ^ 0xD1B54A32D192ED03ull) % n;
}

enum class Dist : int
{
  Uniform,  // uniform [0,1)
  Skewed,   // ~90% in bin kHotBin of a 256-bin histogram over [0,1), rest uniform
  PlantMax, // uniform [0,1) plus a unique 2.0 at a random index
  PlantMin, // uniform [0,1) plus a unique -1.0 at a random index
  // The top-k distributions (benches/topk.rs):
  Normal,     // N(0, 1), Box-Muller on two hashes
  Bits,       // random f32 bit patterns (NaN and infinities included)
  Equal,      // every element 0.5
  Distinct16, // the integers 0 … 15
  Ascending,  // element i is i
  Descending, // element i is n - i
  Nan1,       // uniform [0,1) with 1 % NaN
};

template <class T>
__device__ T from_float(float x);
template <>
__device__ float from_float<float>(float x)
{
  return x;
}
template <>
__device__ __half from_float<__half>(float x)
{
  return __float2half_rn(x);
}
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x)
{
  return __float2bfloat16_rn(x);
}

inline double to_double(float x)
{
  return x;
}
inline double to_double(__half x)
{
  return __half2float(x);
}
inline double to_double(__nv_bfloat16 x)
{
  return __bfloat162float(x);
}

// Fills `copies` copies of n elements, each `stride` elements apart; copy c uses its own seed.
template <class T>
__global__ void generate_kernel(T* buf, uint64_t n, uint64_t stride, uint64_t copies, uint64_t base_seed, Dist dist)
{
  const uint64_t total = stride * copies;
  for (uint64_t idx = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += uint64_t(gridDim.x) * blockDim.x)
  {
    const uint64_t c = idx / stride;
    const uint64_t i = idx - c * stride;
    if (i >= n)
    {
      buf[idx] = from_float<T>(0.0f); // alignment padding between copies, never read
      continue;
    }
    const uint64_t seed = copy_seed(base_seed, c);
    const uint64_t h    = splitmix64(seed ^ splitmix64(i));
    float x             = unit_float(h);
    switch (dist)
    {
      case Dist::Skewed:
        if (unit_float(splitmix64(h)) < 0.9f)
        {
          x = (static_cast<float>(kHotBin) + x) / static_cast<float>(kHistBins);
        }
        break;
      case Dist::PlantMax:
        if (i == plant_index(seed, n))
        {
          x = 2.0f;
        }
        break;
      case Dist::PlantMin:
        if (i == plant_index(seed, n))
        {
          x = -1.0f;
        }
        break;
      case Dist::Normal:
        x = sqrtf(-2.0f * logf(1.0f - x)) * cospif(2.0f * unit_float(splitmix64(h ^ 0x5851F42D4C957F2Dull)));
        break;
      case Dist::Bits:
        x = __uint_as_float(static_cast<uint32_t>(h >> 32));
        break;
      case Dist::Equal:
        x = 0.5f;
        break;
      case Dist::Distinct16:
        x = static_cast<float>(h >> 60);
        break;
      case Dist::Ascending:
        x = static_cast<float>(i);
        break;
      case Dist::Descending:
        x = static_cast<float>(n - i);
        break;
      case Dist::Nan1:
        if (splitmix64(h) % 100 == 0)
        {
          x = __uint_as_float(0x7FC00000u);
        }
        break;
      default:
        break;
    }
    buf[idx] = from_float<T>(x);
  }
}

// Busy-waits for `ns` nanoseconds of GPU time, so that the host can enqueue timed work behind it.
__global__ void spin_kernel(unsigned long long ns)
{
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do
  {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// The bandwidth ceiling: each thread sums float4s grid-stride (kReadUnroll independent 16-byte
// loads in flight per iteration), the block reduces, one partial sum per block is written.
__global__ void __launch_bounds__(kReadBlock) read_f32_kernel(const float* __restrict__ in, uint64_t n, float* partials)
{
  const float4* in4    = reinterpret_cast<const float4*>(in);
  const uint64_t n4    = n / 4;
  const uint64_t tid   = blockIdx.x * uint64_t(kReadBlock) + threadIdx.x;
  const uint64_t step  = uint64_t(gridDim.x) * kReadBlock;
  float acc            = 0.0f;
  uint64_t i           = tid;
  for (; i + (kReadUnroll - 1) * step < n4; i += kReadUnroll * step)
  {
    float4 v[kReadUnroll];
#pragma unroll
    for (int k = 0; k < kReadUnroll; ++k)
    {
      v[k] = in4[i + k * step];
    }
#pragma unroll
    for (int k = 0; k < kReadUnroll; ++k)
    {
      acc += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
  }
  for (; i < n4; i += step)
  {
    const float4 v = in4[i];
    acc += (v.x + v.y) + (v.z + v.w);
  }
  if (tid < n - n4 * 4) // the 0..3 trailing floats
  {
    acc += in[n4 * 4 + tid];
  }
  using BlockReduce = cub::BlockReduce<float, kReadBlock>;
  __shared__ typename BlockReduce::TempStorage temp;
  const float block_sum = BlockReduce(temp).Sum(acc);
  if (threadIdx.x == 0)
  {
    partials[blockIdx.x] = block_sum;
  }
}

// ---------------------------------------------------------------------------------------------
// Small RAII device buffer.
// ---------------------------------------------------------------------------------------------
template <class T>
class DeviceArray
{
public:
  DeviceArray() = default;
  explicit DeviceArray(size_t count)
  {
    alloc(count);
  }
  ~DeviceArray()
  {
    if (ptr_ != nullptr)
    {
      cudaFree(ptr_); // best effort in a destructor
    }
  }
  DeviceArray(const DeviceArray&)            = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void alloc(size_t count)
  {
    CK(cudaMalloc(&ptr_, std::max<size_t>(count, 1) * sizeof(T)));
    count_ = count;
  }
  T* get() const
  {
    return ptr_;
  }
  std::vector<T> download(size_t offset, size_t count) const
  {
    std::vector<T> host(count);
    CK(cudaMemcpy(host.data(), ptr_ + offset, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  T download_one() const
  {
    return download(0, 1)[0];
  }

private:
  T* ptr_       = nullptr;
  size_t count_ = 0;
};

struct Gpu
{
  int device        = 0;
  int sm_count      = 0;
  int l2_bytes      = 0;
  cudaStream_t stream = nullptr;
};

// K rotating copies of one input, each `stride` elements apart (256-byte aligned).
template <class T>
struct Inputs
{
  uint64_t n      = 0;
  uint64_t stride = 0;
  int copies      = 0;
  uint64_t seed   = 0;
  DeviceArray<T> buf;

  void init(uint64_t n_, int copies_, uint64_t seed_, Dist dist, const Gpu& gpu)
  {
    n      = n_;
    copies = copies_;
    seed   = seed_;
    stride = (n * sizeof(T) + kCopyAlignBytes - 1) / kCopyAlignBytes * kCopyAlignBytes / sizeof(T);
    buf.alloc(stride * copies);
    generate_kernel<T><<<gpu.sm_count * 8, 256, 0, gpu.stream>>>(buf.get(), n, stride, copies, seed, dist);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(gpu.stream));
  }
  const T* copy(int c) const
  {
    return buf.get() + uint64_t(c) * stride;
  }
  std::vector<T> download(int c) const
  {
    return buf.download(uint64_t(c) * stride, n);
  }
};

// ---------------------------------------------------------------------------------------------
// Operations. Each op owns its rotating inputs, outputs and temp storage; launch(c) enqueues one
// operation on copy c; check(c) validates the current outputs against a CPU reference on copy c.
// ---------------------------------------------------------------------------------------------
struct Op
{
  virtual ~Op()                                    = default;
  virtual size_t elem_bytes() const                = 0;
  virtual void setup(uint64_t n, int copies, uint64_t seed, const Gpu& gpu) = 0;
  virtual cudaError_t launch(int copy, cudaStream_t s) = 0;
  virtual bool check(int copy)                     = 0;
  virtual double bytes_moved() const               = 0; // valid after check()
};

// Common part: typed rotating inputs plus (optional) CUB temp storage queried once in setup().
template <class T>
struct InputOp : Op
{
  uint64_t n = 0;
  Inputs<T> in;
  DeviceArray<unsigned char> temp;
  size_t temp_bytes = 0;

  size_t elem_bytes() const override
  {
    return sizeof(T);
  }
  virtual Dist dist() const
  {
    return Dist::Uniform;
  }
  virtual void alloc_outputs(const Gpu&) {}
  // CUB-style call: with temp == nullptr only writes the required temp size to bytes.
  virtual cudaError_t run(void* temp, size_t& bytes, const T* d_in, cudaStream_t s) = 0;
  virtual bool needs_temp() const
  {
    return true;
  }

  void setup(uint64_t n_, int copies, uint64_t seed, const Gpu& gpu) override
  {
    n = n_;
    in.init(n, copies, seed, dist(), gpu);
    alloc_outputs(gpu);
    if (needs_temp())
    {
      CK(run(nullptr, temp_bytes, in.copy(0), gpu.stream));
      temp.alloc(temp_bytes);
    }
    CK(cudaStreamSynchronize(gpu.stream));
  }
  cudaError_t launch(int copy, cudaStream_t s) override
  {
    size_t bytes = temp_bytes;
    return run(temp.get(), bytes, in.copy(copy), s);
  }
  double bytes_moved() const override
  {
    return double(n) * sizeof(T);
  }
};

// |got - ref| <= rel * sum|x| + abs, with the reference summed in double.
template <class T>
bool check_sum(const std::vector<T>& x, float got, double rel, double abs_tol)
{
  double ref = 0.0, mag = 0.0;
  for (const T& v : x)
  {
    ref += to_double(v);
    mag += std::fabs(to_double(v));
  }
  const bool ok = std::fabs(double(got) - ref) <= rel * mag + abs_tol;
  if (!ok)
  {
    std::fprintf(stderr, "sum mismatch: gpu=%.9g ref=%.9g sum|x|=%.9g\n", double(got), ref, mag);
  }
  return ok;
}

enum class ReduceKind
{
  Sum,
  Max,
  Min
};

// sum_f32 / max_f32 / min_f32
struct ReduceF32Op : InputOp<float>
{
  ReduceKind kind;
  DeviceArray<float> out;
  explicit ReduceF32Op(ReduceKind k)
      : kind(k)
  {}
  void alloc_outputs(const Gpu&) override
  {
    out.alloc(1);
  }
  cudaError_t run(void* t, size_t& b, const float* d_in, cudaStream_t s) override
  {
    const int items = static_cast<int>(n);
    switch (kind)
    {
      case ReduceKind::Sum:
        return cub::DeviceReduce::Sum(t, b, d_in, out.get(), items, s);
      case ReduceKind::Max:
        return cub::DeviceReduce::Max(t, b, d_in, out.get(), items, s);
      default:
        return cub::DeviceReduce::Min(t, b, d_in, out.get(), items, s);
    }
  }
  bool check(int copy) override
  {
    const std::vector<float> x = in.download(copy);
    const float got            = out.download_one();
    if (kind == ReduceKind::Sum)
    {
      return check_sum(x, got, 1e-5, 1e-6);
    }
    const float ref = kind == ReduceKind::Max ? *std::max_element(x.begin(), x.end())
                                              : *std::min_element(x.begin(), x.end());
    if (got != ref)
    {
      std::fprintf(stderr, "extremum mismatch: gpu=%.9g ref=%.9g\n", double(got), double(ref));
    }
    return got == ref;
  }
};

#if CCCL_VERSION >= 3006000
// The temporary storage of an env-API call: the env API has no (d_temp_storage, temp_storage_bytes)
// overload for DeviceReduce::Sum, and allocates through the env's memory resource on every call. This
// resource hands out one buffer, allocated the first time CUB asks (in setup, outside the timing) and
// reused by every later call; deallocation is a no-op. A call that would need a larger buffer fails
// loudly instead of allocating.
struct TempPool
{
  void* ptr        = nullptr;
  size_t bytes     = 0;
  int allocations  = 0;
  ~TempPool()
  {
    if (ptr != nullptr)
    {
      cudaFree(ptr); // best effort in a destructor
    }
  }
};

struct OnceResource
{
  TempPool* pool = nullptr;
  void* allocate_sync(size_t bytes, size_t /* alignment */)
  {
    if (pool->ptr == nullptr)
    {
      CK(cudaMalloc(&pool->ptr, std::max<size_t>(bytes, 1)));
      pool->bytes = bytes;
      ++pool->allocations;
    }
    if (bytes > pool->bytes)
    {
      std::fprintf(stderr, "CUB asked for %zu temporary bytes after %zu were allocated\n", bytes, pool->bytes);
      std::exit(1);
    }
    return pool->ptr;
  }
  void deallocate_sync(void*, size_t, size_t) noexcept {}
  void* allocate(::cuda::stream_ref, size_t bytes, size_t alignment)
  {
    return allocate_sync(bytes, alignment);
  }
  void deallocate(::cuda::stream_ref, void*, size_t, size_t) noexcept {}
  bool operator==(const OnceResource& other) const
  {
    return pool == other.pool;
  }
  bool operator!=(const OnceResource& other) const
  {
    return pool != other.pool;
  }
};

// sum_f32_gpu_to_gpu: DeviceReduce::Sum through the env API with
// cuda::execution::require(cuda::execution::determinism::gpu_to_gpu) (CUB's reproducible RFA sum), its
// temporary storage allocated once (OnceResource).
struct SumGpuToGpuOp : InputOp<float>
{
  DeviceArray<float> out;
  TempPool pool;
  bool needs_temp() const override
  {
    return false;
  }
  void alloc_outputs(const Gpu& gpu) override
  {
    out.alloc(1);
    // The one allocation: CUB sizes the buffer on this first, untimed call.
    CK(run(nullptr, temp_bytes, in.copy(0), gpu.stream));
    CK(cudaStreamSynchronize(gpu.stream));
  }
  cudaError_t run(void*, size_t&, const float* d_in, cudaStream_t s) override
  {
    // Each part deduced on its own, then the env spelled out: g++ cannot deduce `env{...}` of these parts.
    auto stream = ::cuda::stream_ref{s};
    auto memory = ::cuda::std::execution::prop{::cuda::mr::get_memory_resource, OnceResource{&pool}};
    auto determinism = ::cuda::execution::require(::cuda::execution::determinism::gpu_to_gpu);
    auto env = ::cuda::std::execution::env<decltype(stream), decltype(memory), decltype(determinism)>{
      stream, memory, determinism};
    return cub::DeviceReduce::Sum(d_in, out.get(), static_cast<int>(n), env);
  }
  bool check(int copy) override
  {
    if (pool.allocations != 1)
    {
      std::fprintf(stderr, "gpu_to_gpu: %d temporary allocations, expected 1\n", pool.allocations);
      return false;
    }
    return check_sum(in.download(copy), out.download_one(), 1e-5, 1e-6);
  }
};
#endif // CCCL_VERSION >= 3006000

// argmax_f32 / argmin_f32 (CCCL 3 API: separate value output and int64 index output)
struct ArgExtremumOp : InputOp<float>
{
  bool is_max;
  DeviceArray<float> out_value;
  DeviceArray<int64_t> out_index;
  explicit ArgExtremumOp(bool max)
      : is_max(max)
  {}
  Dist dist() const override
  {
    return is_max ? Dist::PlantMax : Dist::PlantMin;
  }
  void alloc_outputs(const Gpu&) override
  {
    out_value.alloc(1);
    out_index.alloc(1);
  }
  cudaError_t run(void* t, size_t& b, const float* d_in, cudaStream_t s) override
  {
    const int64_t items = static_cast<int64_t>(n);
    return is_max ? cub::DeviceReduce::ArgMax(t, b, d_in, out_value.get(), out_index.get(), items, s)
                  : cub::DeviceReduce::ArgMin(t, b, d_in, out_value.get(), out_index.get(), items, s);
  }
  bool check(int copy) override
  {
    const std::vector<float> x = in.download(copy);
    const auto it = is_max ? std::max_element(x.begin(), x.end()) : std::min_element(x.begin(), x.end());
    const int64_t ref_index = it - x.begin();
    const int64_t planted   = static_cast<int64_t>(plant_index(copy_seed(in.seed, copy), n));
    const float got_value   = out_value.download_one();
    const int64_t got_index = out_index.download_one();
    const bool ok           = got_index == ref_index && got_value == *it && ref_index == planted;
    if (!ok)
    {
      std::fprintf(stderr, "arg-extremum mismatch: gpu=(%lld, %.9g) ref=(%lld, %.9g) planted=%lld\n",
                   static_cast<long long>(got_index), double(got_value), static_cast<long long>(ref_index),
                   double(*it), static_cast<long long>(planted));
    }
    return ok;
  }
};

struct HalfToFloat
{
  __host__ __device__ float operator()(const __half& x) const
  {
    return __half2float(x);
  }
  __host__ __device__ float operator()(const __nv_bfloat16& x) const
  {
    return __bfloat162float(x);
  }
};

// sum_f16 / sum_bf16: half-precision input, float accumulator and output
template <class H>
struct HalfSumOp : InputOp<H>
{
  DeviceArray<float> out;
  void alloc_outputs(const Gpu&) override
  {
    out.alloc(1);
  }
  cudaError_t run(void* t, size_t& b, const H* d_in, cudaStream_t s) override
  {
    return cub::DeviceReduce::TransformReduce(
      t, b, d_in, out.get(), static_cast<int>(this->n), ::cuda::std::plus<float>{}, HalfToFloat{}, 0.0f, s);
  }
  bool check(int copy) override
  {
    return check_sum(this->in.download(copy), out.download_one(), 1e-3, 1e-6);
  }
};

// absmax_f32 / sum_squares_f32 / welford_f32: the user operators of benches/custom.rs (the custom-op example's
// AbsMax, SumSquares and Welford) as a CUB user writes them: cub::DeviceReduce::TransformReduce of a map of
// each element and a combine of two accumulators.
struct AbsF32
{
  __host__ __device__ float operator()(float x) const
  {
    return fabsf(x);
  }
};

// The larger magnitude; a NaN on either side gives NaN (AbsMax::combine).
struct AbsMaxCombine
{
  __host__ __device__ float operator()(float a, float b) const
  {
    return (a > b || a != a) ? a : b;
  }
};

struct SquareF32
{
  __host__ __device__ float operator()(float x) const
  {
    return x * x;
  }
};

// Welford's accumulator in double, as the custom-op example's Moments: count, mean, sum of squared deviations.
struct Moments
{
  double n;
  double mean;
  double m2;
};

struct LiftMoments
{
  __host__ __device__ Moments operator()(float x) const
  {
    return Moments{1.0, static_cast<double>(x), 0.0};
  }
};

// Chan's merge; an empty side returns the other (Welford::combine).
struct ChanMerge
{
  __host__ __device__ Moments operator()(const Moments& a, const Moments& b) const
  {
    if (b.n == 0.0)
    {
      return a;
    }
    if (a.n == 0.0)
    {
      return b;
    }
    const double n     = a.n + b.n;
    const double delta = b.mean - a.mean;
    const double f     = b.n / n;
    return Moments{n, a.mean + delta * f, a.m2 + b.m2 + delta * delta * a.n * f};
  }
};

// absmax_f32: max |x| (exact check).
struct AbsMaxOp : InputOp<float>
{
  DeviceArray<float> out;
  void alloc_outputs(const Gpu&) override
  {
    out.alloc(1);
  }
  cudaError_t run(void* t, size_t& b, const float* d_in, cudaStream_t s) override
  {
    return cub::DeviceReduce::TransformReduce(
      t, b, d_in, out.get(), static_cast<int>(n), AbsMaxCombine{}, AbsF32{}, 0.0f, s);
  }
  bool check(int copy) override
  {
    const std::vector<float> x = in.download(copy);
    float ref                  = 0.0f;
    for (float v : x)
    {
      ref = AbsMaxCombine{}(ref, std::fabs(v));
    }
    const float got = out.download_one();
    if (got != ref)
    {
      std::fprintf(stderr, "absmax mismatch: gpu=%.9g ref=%.9g\n", double(got), double(ref));
    }
    return got == ref;
  }
};

// sum_squares_f32: sum x^2 in float (|gpu-ref| <= 1e-5 * sum x^2 + 1e-6, the reference in double).
struct SumSquaresOp : InputOp<float>
{
  DeviceArray<float> out;
  void alloc_outputs(const Gpu&) override
  {
    out.alloc(1);
  }
  cudaError_t run(void* t, size_t& b, const float* d_in, cudaStream_t s) override
  {
    return cub::DeviceReduce::TransformReduce(
      t, b, d_in, out.get(), static_cast<int>(n), ::cuda::std::plus<float>{}, SquareF32{}, 0.0f, s);
  }
  bool check(int copy) override
  {
    double ref = 0.0;
    for (float v : in.download(copy))
    {
      ref += double(v) * double(v);
    }
    const float got = out.download_one();
    const bool ok   = std::fabs(double(got) - ref) <= 1e-5 * ref + 1e-6;
    if (!ok)
    {
      std::fprintf(stderr, "sum of squares mismatch: gpu=%.9g ref=%.9g\n", double(got), ref);
    }
    return ok;
  }
};

// welford_f32: {n, mean, M2} in double, Chan's merge; mean and population variance within 1e-9 (relative) of a
// two-pass double reference, the count exact.
struct WelfordOp : InputOp<float>
{
  DeviceArray<Moments> out;
  void alloc_outputs(const Gpu&) override
  {
    out.alloc(1);
  }
  cudaError_t run(void* t, size_t& b, const float* d_in, cudaStream_t s) override
  {
    return cub::DeviceReduce::TransformReduce(
      t, b, d_in, out.get(), static_cast<int>(n), ChanMerge{}, LiftMoments{}, Moments{0.0, 0.0, 0.0}, s);
  }
  bool check(int copy) override
  {
    const std::vector<float> x = in.download(copy);
    double sum                 = 0.0;
    for (float v : x)
    {
      sum += v;
    }
    const double mean = sum / double(x.size());
    double m2         = 0.0;
    for (float v : x)
    {
      m2 += (double(v) - mean) * (double(v) - mean);
    }
    const double var = m2 / double(x.size());
    const Moments g  = out.download_one();
    const double gv  = g.m2 / g.n;
    const bool ok    = g.n == double(x.size()) && std::fabs(g.mean - mean) <= 1e-9 * std::fabs(mean)
                   && std::fabs(gv - var) <= 1e-9 * std::fabs(var);
    if (!ok)
    {
      std::fprintf(stderr, "welford mismatch: gpu n=%.17g mean=%.17g var=%.17g ref n=%zu mean=%.17g var=%.17g\n",
                   g.n, g.mean, gv, x.size(), mean, var);
    }
    return ok;
  }
};

// histogram_f32_uniform / histogram_f32_skewed: 256 even bins over [0,1)
struct HistogramOp : InputOp<float>
{
  bool skewed;
  DeviceArray<int> hist;
  explicit HistogramOp(bool skew)
      : skewed(skew)
  {}
  Dist dist() const override
  {
    return skewed ? Dist::Skewed : Dist::Uniform;
  }
  void alloc_outputs(const Gpu&) override
  {
    hist.alloc(kHistBins);
  }
  cudaError_t run(void* t, size_t& b, const float* d_in, cudaStream_t s) override
  {
    return cub::DeviceHistogram::HistogramEven(
      t, b, d_in, hist.get(), kHistBins + 1, 0.0f, 1.0f, static_cast<int>(n), s);
  }
  bool check(int copy) override
  {
    const std::vector<float> x = in.download(copy);
    // Same bin formula as CUB's ScaleTransform for floating-point samples:
    // valid iff lo <= x < hi, bin = int((x - lo) * float(levels - 1) / float(hi - lo)).
    const float lo = 0.0f, hi = 1.0f;
    const float scale = static_cast<float>(static_cast<float>(kHistBins) / static_cast<float>(hi - lo));
    std::vector<long long> ref(kHistBins, 0);
    for (float v : x)
    {
      if (v >= lo && v < hi)
      {
        const int bin = static_cast<int>((v - lo) * scale);
        if (bin >= 0 && bin < kHistBins)
        {
          ++ref[bin];
        }
      }
    }
    const std::vector<int> got = hist.download(0, kHistBins);
    for (int i = 0; i < kHistBins; ++i)
    {
      if (got[i] != ref[i])
      {
        std::fprintf(stderr, "histogram mismatch at bin %d: gpu=%d ref=%lld\n", i, got[i], ref[i]);
        return false;
      }
    }
    return true;
  }
};

struct GreaterThanThreshold
{
  __host__ __device__ bool operator()(const float& x) const
  {
    return x > kSelectThreshold;
  }
};

// select_if_f32: stream compaction of x > 0.5
struct SelectIfOp : InputOp<float>
{
  DeviceArray<float> out;
  DeviceArray<int64_t> num_selected;
  int64_t last_selected = 0;
  void alloc_outputs(const Gpu&) override
  {
    out.alloc(n);
    num_selected.alloc(1);
  }
  cudaError_t run(void* t, size_t& b, const float* d_in, cudaStream_t s) override
  {
    return cub::DeviceSelect::If(
      t, b, d_in, out.get(), num_selected.get(), static_cast<int64_t>(n), GreaterThanThreshold{}, s);
  }
  bool check(int copy) override
  {
    const std::vector<float> x = in.download(copy);
    std::vector<float> ref;
    ref.reserve(x.size());
    for (float v : x)
    {
      if (GreaterThanThreshold{}(v))
      {
        ref.push_back(v);
      }
    }
    last_selected = num_selected.download_one();
    if (last_selected != static_cast<int64_t>(ref.size()))
    {
      std::fprintf(stderr, "select count mismatch: gpu=%lld ref=%zu\n", static_cast<long long>(last_selected),
                   ref.size());
      return false;
    }
    const std::vector<float> got = out.download(0, ref.size());
    const bool ok = std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)) == 0;
    if (!ok)
    {
      std::fprintf(stderr, "select values differ from the CPU filtered sequence\n");
    }
    return ok;
  }
  double bytes_moved() const override
  {
    return double(n) * sizeof(float) + double(last_selected) * sizeof(float);
  }
};

// memcpy_d2d: copy n floats device to device (bytes counted twice: read + write)
struct MemcpyOp : InputOp<float>
{
  DeviceArray<float> dst;
  bool needs_temp() const override
  {
    return false;
  }
  void alloc_outputs(const Gpu&) override
  {
    dst.alloc(n);
  }
  cudaError_t run(void*, size_t&, const float* d_in, cudaStream_t s) override
  {
    return cudaMemcpyAsync(dst.get(), d_in, n * sizeof(float), cudaMemcpyDeviceToDevice, s);
  }
  bool check(int copy) override
  {
    const std::vector<float> src = in.download(copy);
    const std::vector<float> got = dst.download(0, n);
    const bool ok = std::memcmp(src.data(), got.data(), n * sizeof(float)) == 0;
    if (!ok)
    {
      std::fprintf(stderr, "memcpy destination differs from the source\n");
    }
    return ok;
  }
  double bytes_moved() const override
  {
    return 2.0 * double(n) * sizeof(float);
  }
};

// read_f32: the hand-written bandwidth-ceiling kernel
struct ReadOp : InputOp<float>
{
  int grid = 1;
  DeviceArray<float> partials;
  bool needs_temp() const override
  {
    return false;
  }
  void alloc_outputs(const Gpu& gpu) override
  {
    int blocks_per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, read_f32_kernel, kReadBlock, 0));
    const uint64_t needed = (n / 4 + kReadBlock - 1) / kReadBlock;
    grid = static_cast<int>(std::max<uint64_t>(1, std::min<uint64_t>(needed, uint64_t(blocks_per_sm) * gpu.sm_count)));
    partials.alloc(grid);
  }
  cudaError_t run(void*, size_t&, const float* d_in, cudaStream_t s) override
  {
    read_f32_kernel<<<grid, kReadBlock, 0, s>>>(d_in, n, partials.get());
    return cudaGetLastError();
  }
  bool check(int copy) override
  {
    const std::vector<float> p = partials.download(0, grid);
    double got = 0.0;
    for (float v : p)
    {
      got += v;
    }
    return check_sum(in.download(copy), static_cast<float>(got), 1e-5, 1e-6);
  }
};

// One flag byte per element of every input copy (the same layout), set where x > kSelectThreshold.
__global__ void flag_kernel(const float* x, unsigned char* flags, uint64_t total)
{
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < total;
       i += uint64_t(gridDim.x) * blockDim.x)
  {
    flags[i] = x[i] > kSelectThreshold ? 1 : 0;
  }
}

// select_flagged_f32: the compaction of select_if_f32, driven by flags, so its check is the same.
struct SelectFlaggedOp : SelectIfOp
{
  DeviceArray<unsigned char> flags;
  void alloc_outputs(const Gpu& gpu) override
  {
    SelectIfOp::alloc_outputs(gpu);
    const uint64_t total = in.stride * uint64_t(in.copies);
    flags.alloc(total);
    flag_kernel<<<gpu.sm_count * 8, 256, 0, gpu.stream>>>(in.buf.get(), flags.get(), total);
    CK(cudaGetLastError());
  }
  cudaError_t run(void* t, size_t& b, const float* d_in, cudaStream_t s) override
  {
    const unsigned char* f = flags.get() + (d_in - in.buf.get());
    return cub::DeviceSelect::Flagged(
      t, b, d_in, f, out.get(), num_selected.get(), static_cast<int64_t>(n), s);
  }
  double bytes_moved() const override
  {
    return SelectIfOp::bytes_moved() + double(n);
  }
};

#if CCCL_VERSION >= 3006000
// The order DeviceTopK's radix passes give f32 keys: the bits made order-preserving as unsigned (NaN with the
// sign bit clear above +inf).
inline uint32_t radix_key(float x)
{
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The env of a CUB call on stream `s` with the execution requirements `reqs` (cuda::execution::require(...)).
template <class Requirements>
auto stream_env(cudaStream_t s, Requirements reqs)
{
  auto stream = ::cuda::stream_ref{s};
  return ::cuda::std::execution::env<decltype(stream), Requirements>{stream, reqs};
}

// topk_<distribution>_k<k>: cub::DeviceTopK::MaxPairs (keys and their uint32 indices from a counting
// iterator), in the one mode CCCL 3.6 implements: require(determinism::not_guaranteed,
// output_ordering::unsorted). Checked in one pass: each returned index holds its key, no index twice, and the
// k keys are the k greatest (every element above the least returned key was returned, and at least k are at
// or above it).
struct TopKOp : InputOp<float>
{
  Dist distribution;
  uint32_t k;
  DeviceArray<float> keys_out;
  DeviceArray<uint32_t> index_out;
  TopKOp(Dist d, uint32_t k_)
      : distribution(d)
      , k(k_)
  {}
  Dist dist() const override
  {
    return distribution;
  }
  void alloc_outputs(const Gpu&) override
  {
    keys_out.alloc(k);
    index_out.alloc(k);
  }
  cudaError_t run(void* t, size_t& b, const float* d_in, cudaStream_t s) override
  {
    auto env = stream_env(s, ::cuda::execution::require(::cuda::execution::determinism::not_guaranteed,
                                                        ::cuda::execution::output_ordering::unsorted));
    return cub::DeviceTopK::MaxPairs(
      t, b, d_in, keys_out.get(), ::cuda::counting_iterator<uint32_t>{0}, index_out.get(), static_cast<uint32_t>(n),
      std::min<uint32_t>(k, static_cast<uint32_t>(n)), env);
  }
  bool check(int copy) override
  {
    const std::vector<float> x     = in.download(copy);
    const uint32_t kk              = std::min<uint32_t>(k, static_cast<uint32_t>(n));
    const std::vector<float> keys  = keys_out.download(0, kk);
    const std::vector<uint32_t> ix = index_out.download(0, kk);
    std::vector<bool> seen(n, false);
    uint32_t least = 0xFFFFFFFFu;
    for (uint32_t j = 0; j < kk; ++j)
    {
      if (ix[j] >= n || seen[ix[j]] || radix_key(x[ix[j]]) != radix_key(keys[j]))
      {
        std::fprintf(stderr, "topk: result %u (index %u) is not an element of the input\n", j, ix[j]);
        return false;
      }
      seen[ix[j]] = true;
      least       = std::min(least, radix_key(keys[j]));
    }
    uint64_t above = 0, at_or_above = 0, returned_above = 0;
    for (uint32_t j = 0; j < kk; ++j)
    {
      returned_above += radix_key(keys[j]) > least;
    }
    for (uint64_t i = 0; i < n; ++i)
    {
      const uint32_t key = radix_key(x[i]);
      above += key > least;
      at_or_above += key >= least;
    }
    const bool ok = above == returned_above && at_or_above >= kk;
    if (!ok)
    {
      std::fprintf(stderr, "topk: not the %u greatest (%llu above the least returned, %llu returned above it)\n", kk,
                   static_cast<unsigned long long>(above), static_cast<unsigned long long>(returned_above));
    }
    return ok;
  }
};

// Largest k of batched_topk_*: sorted output needs a static bound on k that fits shared memory (the library's per-row
// limit too).
constexpr uint32_t kBatchedTopKMaxK = 1024;

// Row starts of a row-major matrix, for DeviceBatchedTopK's iterator of per-segment iterators.
template <class P>
struct RowStart
{
  P base;
  uint64_t stride;
  __host__ __device__ P operator()(int row) const
  {
    return base + uint64_t(row) * stride;
  }
};

// Row r's start, base + r * stride, for every row r.
template <class P>
auto row_starts(P base, uint64_t stride)
{
  return ::cuda::make_transform_iterator(::cuda::counting_iterator<int>{0}, RowStart<P>{base, stride});
}

// batched_topk_c<cols>_k<k>: cub::DeviceBatchedTopK::MaxPairs over the rows of an n / cols × cols row-major
// N(0, 1) matrix (keys and their uint32 column indices), k per row, in its closest mode to ours:
// require(determinism::gpu_to_gpu, tie_break::prefer_smaller_index, output_ordering::sorted) (stable_sorted is not
// implemented in CCCL 3.6). Rows 0, 1 and the last are checked against a CPU sort (greater first, then the smaller
// index).
struct BatchedTopKOp : InputOp<float>
{
  uint32_t cols;
  uint32_t k;
  DeviceArray<float> keys_out;
  DeviceArray<uint32_t> index_out;
  BatchedTopKOp(uint32_t c, uint32_t k_)
      : cols(c)
      , k(k_)
  {}
  Dist dist() const override
  {
    return Dist::Normal;
  }
  int rows() const
  {
    return static_cast<int>(n / cols);
  }
  void alloc_outputs(const Gpu&) override
  {
    keys_out.alloc(uint64_t(rows()) * k);
    index_out.alloc(uint64_t(rows()) * k);
  }
  cudaError_t run(void* t, size_t& b, const float* d_in, cudaStream_t s) override
  {
    // Every row's values are its column indices.
    using Columns = ::cuda::counting_iterator<uint32_t>;
    auto index_in = ::cuda::constant_iterator<Columns>{Columns{0}};
    auto env      = stream_env(s, ::cuda::execution::require(::cuda::execution::determinism::gpu_to_gpu,
                                                        ::cuda::execution::tie_break::prefer_smaller_index,
                                                        ::cuda::execution::output_ordering::sorted));
    return cub::DeviceBatchedTopK::MaxPairs(
      t, b, row_starts(d_in, cols), row_starts(keys_out.get(), k), index_in, row_starts(index_out.get(), k),
      ::cuda::args::immediate{cols, ::cuda::args::bounds<uint32_t{1}, uint32_t{1} << 21>()},
      ::cuda::args::immediate{k, ::cuda::args::bounds<uint32_t{1}, kBatchedTopKMaxK>()}, rows(), env);
  }
  bool check(int copy) override
  {
    const std::vector<float> x = in.download(copy);
    const int last             = rows() - 1;
    for (int row : {0, 1, last})
    {
      if (row < 0 || row > last)
      {
        continue;
      }
      const float* r = x.data() + uint64_t(row) * cols;
      std::vector<uint32_t> want(cols);
      for (uint32_t j = 0; j < cols; ++j)
      {
        want[j] = j;
      }
      const uint32_t kk = std::min(k, cols);
      std::partial_sort(want.begin(), want.begin() + kk, want.end(), [&](uint32_t a, uint32_t b) {
        return radix_key(r[a]) != radix_key(r[b]) ? radix_key(r[a]) > radix_key(r[b]) : a < b;
      });
      const std::vector<uint32_t> got = index_out.download(uint64_t(row) * k, kk);
      const std::vector<float> got_keys = keys_out.download(uint64_t(row) * k, kk);
      for (uint32_t j = 0; j < kk; ++j)
      {
        if (got[j] != want[j] || radix_key(got_keys[j]) != radix_key(r[want[j]]))
        {
          std::fprintf(stderr, "batched topk: row %d place %u: index %u, want %u\n", row, j, got[j], want[j]);
          return false;
        }
      }
    }
    return true;
  }
  double bytes_moved() const override
  {
    return double(n) * sizeof(float);
  }
};

bool parse_n(const char* text, uint64_t& n);

// Splits "<prefix><middle>_k<k>" into its middle and k; false when `name` is not of that form.
bool split_k(const std::string& name, const std::string& prefix, std::string& middle, uint64_t& k)
{
  const size_t split = name.rfind("_k");
  if (name.rfind(prefix, 0) != 0 || split == std::string::npos || split <= prefix.size()
      || !parse_n(name.c_str() + split + 2, k))
  {
    return false;
  }
  middle = name.substr(prefix.size(), split - prefix.size());
  return true;
}

// "topk_<distribution>_k<k>" or "batched_topk_c<cols>_k<k>" as an op, or nullptr.
std::unique_ptr<Op> make_topk_op(const std::string& name)
{
  static const std::pair<const char*, Dist> distributions[] = {
    {"uniform", Dist::Uniform},       {"normal", Dist::Normal},         {"bits", Dist::Bits},
    {"equal", Dist::Equal},           {"distinct16", Dist::Distinct16}, {"ascending", Dist::Ascending},
    {"descending", Dist::Descending}, {"nan1", Dist::Nan1}};
  std::string middle;
  uint64_t k = 0, cols = 0;
  if (split_k(name, "batched_topk_c", middle, k))
  {
    const bool fits =
      parse_n(middle.c_str(), cols) && cols <= (uint64_t(1) << 21) && k <= cols && k <= kBatchedTopKMaxK;
    return fits ? std::make_unique<BatchedTopKOp>(static_cast<uint32_t>(cols), static_cast<uint32_t>(k)) : nullptr;
  }
  if (!split_k(name, "topk_", middle, k) || k > UINT32_MAX)
  {
    return nullptr;
  }
  for (const auto& d : distributions)
  {
    if (middle == d.first)
    {
      return std::make_unique<TopKOp>(d.second, static_cast<uint32_t>(k));
    }
  }
  return nullptr;
}
#endif // CCCL_VERSION >= 3006000

std::unique_ptr<Op> make_op(const std::string& name)
{
  if (name == "sum_f32") return std::make_unique<ReduceF32Op>(ReduceKind::Sum);
#if CCCL_VERSION >= 3006000
  if (name == "sum_f32_gpu_to_gpu") return std::make_unique<SumGpuToGpuOp>();
#endif
  if (name == "max_f32") return std::make_unique<ReduceF32Op>(ReduceKind::Max);
  if (name == "min_f32") return std::make_unique<ReduceF32Op>(ReduceKind::Min);
  if (name == "argmax_f32") return std::make_unique<ArgExtremumOp>(true);
  if (name == "argmin_f32") return std::make_unique<ArgExtremumOp>(false);
  if (name == "sum_f16") return std::make_unique<HalfSumOp<__half>>();
  if (name == "sum_bf16") return std::make_unique<HalfSumOp<__nv_bfloat16>>();
  if (name == "absmax_f32") return std::make_unique<AbsMaxOp>();
  if (name == "sum_squares_f32") return std::make_unique<SumSquaresOp>();
  if (name == "welford_f32") return std::make_unique<WelfordOp>();
  if (name == "histogram_f32_uniform") return std::make_unique<HistogramOp>(false);
  if (name == "histogram_f32_skewed") return std::make_unique<HistogramOp>(true);
  if (name == "select_if_f32") return std::make_unique<SelectIfOp>();
  if (name == "select_flagged_f32") return std::make_unique<SelectFlaggedOp>();
  if (name == "memcpy_d2d") return std::make_unique<MemcpyOp>();
  if (name == "read_f32") return std::make_unique<ReadOp>();
#if CCCL_VERSION >= 3006000
  return make_topk_op(name);
#else
  return nullptr;
#endif
}

// ---------------------------------------------------------------------------------------------
// Timing.
// ---------------------------------------------------------------------------------------------
double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double wall_ms_since(std::chrono::steady_clock::time_point t0)
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void spin(const Gpu& gpu, double us)
{
  spin_kernel<<<1, 1, 0, gpu.stream>>>(static_cast<unsigned long long>(std::min(us, 200000.0) * 1000.0));
  CK(cudaGetLastError());
}

struct Timing
{
  double median_us = 0.0; // per launch
  int last_copy    = 0;   // the copy read by the last executed launch
  int samples      = 0;
  const char* mode = "";
};

// Times `launch(copy)` (which enqueues one operation on gpu.stream and returns its cudaError_t),
// rotating over `copies` inputs. See the header comment for the method.
template <class Launch>
Timing time_launches(Launch&& launch, int copies, uint64_t n, const Gpu& gpu)
{
  Timing result;
  cudaStream_t s = gpu.stream;
  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));

  if (n <= kGraphMaxN)
  {
    // One graph per 100 consecutive copies (at most kMaxGraphs graphs); replays go round-robin.
    const int num_graphs = std::min((copies + kLaunchesPerGraph - 1) / kLaunchesPerGraph, kMaxGraphs);
    std::vector<cudaGraphExec_t> execs(num_graphs);
    for (int g = 0; g < num_graphs; ++g)
    {
      cudaGraph_t graph;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int j = 0; j < kLaunchesPerGraph; ++j)
      {
        CK(launch((g * kLaunchesPerGraph + j) % copies));
      }
      CK(cudaStreamEndCapture(s, &graph));
      CK(cudaGraphInstantiate(&execs[g], graph, 0));
      CK(cudaGraphDestroy(graph));
    }
    // Warm-up: every graph at least once and at least kWarmupMs of wall time.
    int replay     = 0;
    const auto t0  = std::chrono::steady_clock::now();
    while (replay < num_graphs || wall_ms_since(t0) < kWarmupMs)
    {
      CK(cudaGraphLaunch(execs[replay++ % num_graphs], s));
      CK(cudaStreamSynchronize(s));
    }
    std::vector<double> us;
    for (int r = 0; r < kGraphReplays; ++r, ++replay)
    {
      const int g = replay % num_graphs;
      spin(gpu, 200.0);
      CK(cudaEventRecord(start, s));
      CK(cudaGraphLaunch(execs[g], s));
      CK(cudaEventRecord(stop, s));
      CK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      CK(cudaEventElapsedTime(&ms, start, stop));
      us.push_back(ms * 1000.0 / kLaunchesPerGraph);
      result.last_copy = (g * kLaunchesPerGraph + kLaunchesPerGraph - 1) % copies;
    }
    for (cudaGraphExec_t e : execs)
    {
      CK(cudaGraphExecDestroy(e));
    }
    result.median_us = median(us);
    result.samples   = kGraphReplays;
    result.mode      = "graph";
  }
  else
  {
    int copy = 0;
    // Warm-up in growing batches: >= 5 launches and >= kWarmupMs of GPU time. It also estimates
    // the GPU time and the host enqueue time per launch.
    int done = 0;
    double gpu_ms = 0.0, host_ms = 0.0;
    while (done < 5 || gpu_ms < kWarmupMs)
    {
      const int batch = std::max(5, std::min(done, 1024));
      CK(cudaEventRecord(start, s));
      const auto h0 = std::chrono::steady_clock::now();
      for (int b = 0; b < batch; ++b)
      {
        CK(launch(copy));
        CK(cudaGetLastError());
        copy = (copy + 1) % copies;
      }
      host_ms += wall_ms_since(h0);
      CK(cudaEventRecord(stop, s));
      CK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      CK(cudaEventElapsedTime(&ms, start, stop));
      gpu_ms += ms;
      done += batch;
    }
    const double est_us  = std::max(gpu_ms * 1000.0 / done, 0.1);
    const double host_us = host_ms * 1000.0 / done;
    const int runs = static_cast<int>(std::min<double>(
      kMaxTimedLaunches, std::max<double>(kMinTimedLaunches, std::ceil(kTargetTimedMs * 1000.0 / est_us))));

    // Timed: chunks of launches, each launch bracketed by its own event pair; a spin kernel in
    // front of each chunk lets the host enqueue the chunk before the GPU reaches it.
    std::vector<cudaEvent_t> ev(2 * kEventChunk);
    for (cudaEvent_t& e : ev)
    {
      CK(cudaEventCreate(&e));
    }
    std::vector<double> us;
    us.reserve(runs);
    for (int first = 0; first < runs; first += kEventChunk)
    {
      const int count = std::min(kEventChunk, runs - first);
      spin(gpu, 1.5 * count * (host_us + 3.0) + 50.0);
      for (int i = 0; i < count; ++i)
      {
        CK(cudaEventRecord(ev[2 * i], s));
        CK(launch(copy));
        CK(cudaGetLastError());
        CK(cudaEventRecord(ev[2 * i + 1], s));
        result.last_copy = copy;
        copy             = (copy + 1) % copies;
      }
      CK(cudaEventSynchronize(ev[2 * count - 1]));
      for (int i = 0; i < count; ++i)
      {
        float ms = 0.0f;
        CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
        us.push_back(ms * 1000.0);
      }
    }
    for (cudaEvent_t e : ev)
    {
      CK(cudaEventDestroy(e));
    }
    result.median_us = median(us);
    result.samples   = runs;
    result.mode      = "events";
  }
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(stop));
  CK(cudaStreamSynchronize(s));
  return result;
}

// blocking_sum_f32: what the user of a blocking call waits for: DeviceReduce::Sum on the stream, then the
// 4-byte result copied into a host variable on the same stream and a stream synchronize. Host wall clock
// per call, the median of 11 batches of 1000 calls, rotating over the copies.
Timing time_blocking(ReduceF32Op& op, int copies, const Gpu& gpu)
{
  cudaStream_t s = gpu.stream;
  float host     = 0.0f;
  int copy       = 0;
  auto call      = [&]() {
    CK(op.launch(copy, s));
    CK(cudaMemcpyAsync(&host, op.out.get(), sizeof(float), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    copy = (copy + 1) % copies;
  };
  for (int i = 0; i < 500; ++i)
  {
    call();
  }
  std::vector<double> us;
  constexpr int kBatches = 11, kCalls = 1000;
  for (int b = 0; b < kBatches; ++b)
  {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i)
    {
      call();
    }
    us.push_back(wall_ms_since(t0) * 1000.0 / kCalls);
  }
  Timing t;
  t.median_us = median(us);
  t.samples   = kBatches;
  t.mode      = "blocking";
  t.last_copy = (copy + copies - 1) % copies;
  return t;
}

// loop_<op>: see the header. Rotates over the copies as the other modes do.
template <class Launch>
Timing time_loop(Launch&& launch, int copies, const Gpu& gpu)
{
  constexpr int kWarmup = 500, kLoops = 11, kCalls = 2000;
  cudaStream_t s = gpu.stream;
  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  Timing result;
  int copy = 0;
  for (int i = 0; i < kWarmup; ++i)
  {
    CK(launch(copy));
    copy = (copy + 1) % copies;
  }
  CK(cudaStreamSynchronize(s));
  std::vector<double> us;
  for (int l = 0; l < kLoops; ++l)
  {
    CK(cudaEventRecord(start, s));
    for (int i = 0; i < kCalls; ++i)
    {
      CK(launch(copy));
      result.last_copy = copy;
      copy             = (copy + 1) % copies;
    }
    CK(cudaEventRecord(stop, s));
    CK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(ms * 1000.0 / kCalls);
  }
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(stop));
  result.median_us = median(us);
  result.samples   = kLoops;
  result.mode      = "loop";
  return result;
}

// Number of rotating copies: K * bytes >= 3 * L2, capped by memory and (graph path) graph count.
int rotation_copies(uint64_t n, size_t elem_bytes, const Gpu& gpu)
{
  const uint64_t bytes        = n * elem_bytes;
  const uint64_t stride_bytes = (bytes + kCopyAlignBytes - 1) / kCopyAlignBytes * kCopyAlignBytes;
  const uint64_t want         = 3ull * uint64_t(gpu.l2_bytes);
  uint64_t k                  = bytes >= want ? 1 : (want + bytes - 1) / bytes;
  k = std::min<uint64_t>(k, std::max<uint64_t>(1, kMaxRotationBytes / stride_bytes));
  if (n <= kGraphMaxN)
  {
    k = std::min<uint64_t>(k, uint64_t(kMaxGraphs) * kLaunchesPerGraph);
  }
  return static_cast<int>(k);
}

uint64_t name_hash(const std::string& s)
{
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (unsigned char c : s)
  {
    h = (h ^ c) * 1099511628211ull;
  }
  return h;
}

bool parse_n(const char* text, uint64_t& n)
{
  if (text == nullptr || *text < '0' || *text > '9')
  {
    return false;
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v == 0)
  {
    return false;
  }
  n = v;
  return true;
}

void usage()
{
  std::fprintf(stderr,
               "usage: cub_bench <op> <n> [<n> ...]\n"
               "ops: sum_f32 blocking_sum_f32 sum_f32_gpu_to_gpu (CCCL >= 3.6) max_f32 min_f32 argmax_f32 argmin_f32 sum_f16 sum_bf16\n"
               "     absmax_f32 sum_squares_f32 welford_f32\n"
               "     histogram_f32_uniform histogram_f32_skewed select_if_f32 memcpy_d2d read_f32\n"
               "     loop_<op>: <op> launched back to back, events around 2000 launches\n");
}

} // namespace

int main(int argc, char** argv)
{
#if CCCL_VERSION < 3006000
  if (argc >= 2 && std::string(argv[1]) == "sum_f32_gpu_to_gpu")
  {
    std::fprintf(stderr, "sum_f32_gpu_to_gpu needs CCCL >= 3.6 (this build has %d.%d): compile with -I the cuda-cccl "
                         "1.2.1 wheel's cuda/cccl/headers/include (the bench's CCCL_INCLUDE)\n",
                 CCCL_MAJOR_VERSION, CCCL_MINOR_VERSION);
    return 2;
  }
#endif
  const std::string op_name = argc >= 2 ? argv[1] : "";
  // The blocking row times the sum_f32 op with its result copied to the host after every call; loop_<op>
  // times <op> in a plain loop.
  const bool blocking        = op_name == "blocking_sum_f32";
  const bool loop            = op_name.rfind("loop_", 0) == 0;
  const std::string base_op  = blocking ? "sum_f32" : loop ? op_name.substr(5) : op_name;
  if (argc < 3 || !make_op(base_op))
  {
    usage();
    return 2;
  }
  std::vector<uint64_t> sizes;
  for (int a = 2; a < argc; ++a)
  {
    uint64_t n = 0;
    if (!parse_n(argv[a], n))
    {
      std::fprintf(stderr, "invalid n '%s' (must be a positive integer)\n", argv[a]);
      usage();
      return 2;
    }
    sizes.push_back(n);
  }

  Gpu gpu;
  CK(cudaGetDevice(&gpu.device));
  CK(cudaDeviceGetAttribute(&gpu.sm_count, cudaDevAttrMultiProcessorCount, gpu.device));
  CK(cudaDeviceGetAttribute(&gpu.l2_bytes, cudaDevAttrL2CacheSize, gpu.device));
  CK(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, gpu.device));
  std::fprintf(stderr, "cub_bench: %s, %d SMs, L2 %d bytes, CUB %d.%d.%d\n", prop.name, gpu.sm_count, gpu.l2_bytes,
               CUB_MAJOR_VERSION, CUB_MINOR_VERSION, CUB_SUBMINOR_VERSION);

  bool all_ok = true;
  for (const uint64_t n : sizes)
  {
    if (n > uint64_t(INT32_MAX))
    {
      std::fprintf(stderr, "cub_bench: skipping %s n=%llu (n > 2^31-1 is not supported)\n", op_name.c_str(),
                   static_cast<unsigned long long>(n));
      continue;
    }
    std::unique_ptr<Op> op = make_op(base_op);
    const int copies       = rotation_copies(n, op->elem_bytes(), gpu);
    op->setup(n, copies, name_hash(op_name) ^ splitmix64(n), gpu);

    const auto launch = [&](int c) { return op->launch(c, gpu.stream); };
    const Timing t    = blocking ? time_blocking(static_cast<ReduceF32Op&>(*op), copies, gpu)
                      : loop     ? time_loop(launch, copies, gpu)
                                 : time_launches(launch, copies, n, gpu);
    const bool ok  = op->check(t.last_copy);
    all_ok         = all_ok && ok;

    const double bytes = op->bytes_moved();
    const double gbps  = bytes / (t.median_us * 1e3);
    std::printf("cub,%s,%llu,%.3f,%.3f,%s\n", op_name.c_str(), static_cast<unsigned long long>(n), t.median_us, gbps,
                ok ? "PASS" : "FAIL");
    std::fflush(stdout);
    std::fprintf(stderr, "cub_bench: %s n=%llu copies=%d mode=%s samples=%d median_us=%.3f GB/s=%.1f %s\n",
                 op_name.c_str(), static_cast<unsigned long long>(n), copies, t.mode, t.samples, t.median_us, gbps,
                 ok ? "PASS" : "FAIL");
  }

  CK(cudaStreamDestroy(gpu.stream));
  return all_ok ? 0 : 1;
}
