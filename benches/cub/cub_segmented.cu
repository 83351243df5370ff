// cub_segmented.cu -- CUB comparator for the segmented-reduction benchmark (benches/segmented.rs).
//
// Build:  nvcc -O3 -std=c++17 -arch=sm_90 [-I$CCCL_INCLUDE] -o cub_segmented cub_segmented.cu
//         With CCCL >= 3.2 headers (the `cuda-cccl` wheel 1.2.1 carries 3.6 under
//         cuda/cccl/headers/include) the fixed-size-segment API is used for the matrix shapes; with older
//         headers (the CUDA 13.0 toolkit's CCCL 3.0) the offset API with materialised offsets.
// Usage:  cub_segmented <op> <shape> [<shape> ...]
//   op:    sum | argmax                  cub::DeviceSegmentedReduce::Sum / ArgMax over float
//   shape: <rows>x<cols>                  rows segments of cols floats, back to back
//          ragged<count>                  count segments with lengths splitmix64(i) % 10001 (the same
//                                         lengths benches/segmented.rs builds), offset API
// Output: one CSV line per shape: cub,<op>,<shape>,<median_us>,<gbps>,<PASS|FAIL>,<api>
//   gbps = input bytes / median time; api = fixed or offsets.
// Method: as cub_bench.cu: inputs random in [0,1) on the device, copies rotated so the timed reads come
// from HBM (K copies with K * bytes >= 3 * L2), temporary storage allocated once, warm-up, one event
// pair per launch, median of max(21, ~0.3 s) launches; a spin kernel ahead of each chunk. The last
// launch's output is checked on a few segments against a CPU reference in double.
#include <cub/cub.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static void check_cuda(cudaError_t err, const char* what, int line)
{
  if (err != cudaSuccess)
  {
    std::fprintf(stderr, "cub_segmented.cu:%d: %s: %s\n", line, what, cudaGetErrorString(err));
    std::exit(1);
  }
}
#define CK(call) check_cuda((call), #call, __LINE__)

// The offset API writes KeyValuePair<int, float>; the fixed-size API (CCCL >= 3.2) cuda::std::pair<int,
// float>. Both are 8 bytes: one buffer serves both, read back by the API that wrote it.
using ArgKv = cub::KeyValuePair<int, float>;
#if CUB_VERSION >= 300200
#  define FIXED_API 1
using ArgPair = ::cuda::std::pair<int, float>;
static_assert(sizeof(ArgPair) == sizeof(ArgKv), "one output buffer serves both APIs");
#else
#  define FIXED_API 0
#endif

__host__ __device__ inline uint64_t splitmix64(uint64_t x)
{
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void fill(float* x, size_t n, uint64_t seed)
{
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
  {
    x[i] = float(splitmix64(seed ^ (i * 0x9E3779B97F4A7C15ull)) >> 40) * (1.0f / 16777216.0f);
  }
}

__global__ void spin(long long ns)
{
  long long start = clock64();
  while (clock64() - start < ns) {}
}

struct Shape
{
  std::string name;
  std::vector<int> offsets; // count + 1
  long long rows = 0;
  int cols = 0;
  bool ragged = false;
};

static bool parse(const char* s, Shape& out)
{
  out.name = s;
  if (std::strncmp(s, "ragged", 6) == 0)
  {
    long long count = std::atoll(s + 6);
    if (count <= 0) return false;
    out.ragged = true;
    out.offsets.resize(count + 1);
    out.offsets[0] = 0;
    for (long long i = 0; i < count; ++i)
    {
      out.offsets[i + 1] = out.offsets[i] + int(splitmix64(uint64_t(i)) % 10001);
    }
    out.rows = count;
    return true;
  }
  long long r = 0, c = 0;
  if (std::sscanf(s, "%lldx%lld", &r, &c) != 2 || r <= 0 || c <= 0 || c > INT32_MAX) return false;
  out.rows = r;
  out.cols = int(c);
  return true;
}

int main(int argc, char** argv)
{
  if (argc < 3)
  {
    std::fprintf(stderr, "usage: cub_segmented sum|argmax <rows>x<cols>|ragged<count> ...\n");
    return 2;
  }
  const std::string op = argv[1];
  const bool argmax = op == "argmax";
  if (!argmax && op != "sum") return 2;
  int device = 0, l2 = 0;
  CK(cudaGetDevice(&device));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bool all_pass = true;

  for (int a = 2; a < argc; ++a)
  {
    Shape sh;
    if (!parse(argv[a], sh))
    {
      std::fprintf(stderr, "bad shape %s\n", argv[a]);
      return 2;
    }
    const size_t n = sh.ragged ? size_t(sh.offsets.back()) : size_t(sh.rows) * sh.cols;
    const size_t bytes = n * sizeof(float);
    const int copies = int(std::min<size_t>(64, std::max<size_t>(1, (3 * size_t(l2) + bytes - 1) / bytes)));
    float* in = nullptr;
    CK(cudaMalloc(&in, bytes * copies));
    fill<<<4096, 256, 0, stream>>>(in, n * copies, 2024);
    CK(cudaGetLastError());
    const long long segs = sh.rows;
    float* sums = nullptr;
    void* args = nullptr;
    CK(cudaMalloc(&sums, segs * sizeof(float)));
    CK(cudaMalloc(&args, segs * sizeof(ArgKv)));
    // Offsets: for ragged shapes, and for the matrix shapes when the fixed-size API is missing.
    int* d_off = nullptr;
    const bool use_offsets = sh.ragged || !FIXED_API;
    if (use_offsets)
    {
      if (!sh.ragged)
      {
        sh.offsets.resize(segs + 1);
        for (long long i = 0; i <= segs; ++i) sh.offsets[i] = int(i * sh.cols);
      }
      CK(cudaMalloc(&d_off, (segs + 1) * sizeof(int)));
      CK(cudaMemcpy(d_off, sh.offsets.data(), (segs + 1) * sizeof(int), cudaMemcpyHostToDevice));
    }
    auto launch = [&](void* temp, size_t& temp_bytes, int copy) {
      const float* x = in + size_t(copy) * n;
      if (use_offsets)
      {
        if (argmax)
          CK(cub::DeviceSegmentedReduce::ArgMax(temp, temp_bytes, x, static_cast<ArgKv*>(args), segs, d_off,
                                                d_off + 1, stream));
        else
          CK(cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, x, sums, segs, d_off, d_off + 1, stream));
      }
      else
      {
#if FIXED_API
        if (argmax)
          CK(cub::DeviceSegmentedReduce::ArgMax(temp, temp_bytes, x, static_cast<ArgPair*>(args), segs, sh.cols,
                                                stream));
        else
          CK(cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, x, sums, segs, sh.cols, stream));
#endif
      }
    };
    size_t temp_bytes = 0;
    launch(nullptr, temp_bytes, 0);
    void* temp = nullptr;
    CK(cudaMalloc(&temp, std::max<size_t>(temp_bytes, 1)));
    for (int i = 0; i < 5 + copies; ++i) launch(temp, temp_bytes, i % copies);
    CK(cudaStreamSynchronize(stream));

    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, stream));
    for (int i = 0; i < 8; ++i) launch(temp, temp_bytes, i % copies);
    CK(cudaEventRecord(e1, stream));
    CK(cudaEventSynchronize(e1));
    float est_ms = 0;
    CK(cudaEventElapsedTime(&est_ms, e0, e1));
    const double est_us = std::max(1.0, est_ms * 1000.0 / 8);
    const int samples = int(std::min(2000.0, std::max(21.0, 300000.0 / est_us)));
    std::vector<cudaEvent_t> ev(33);
    for (auto& e : ev) CK(cudaEventCreate(&e));
    std::vector<double> times;
    int k = 0;
    while (int(times.size()) < samples)
    {
      const int m = std::min(32, samples - int(times.size()));
      spin<<<1, 32, 0, stream>>>((long long)(std::min(2e6, std::max(2e4, est_us * m * 1000))) * 2);
      CK(cudaEventRecord(ev[0], stream));
      for (int i = 0; i < m; ++i)
      {
        launch(temp, temp_bytes, k++ % copies);
        CK(cudaEventRecord(ev[i + 1], stream));
      }
      CK(cudaEventSynchronize(ev[m]));
      for (int i = 0; i < m; ++i)
      {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
        times.push_back(ms * 1000.0);
      }
    }
    std::sort(times.begin(), times.end());
    const double us = times[times.size() / 2];

    // Check a few segments of the last launch's copy.
    const int last = (k - 1) % copies;
    std::vector<float> host(n);
    CK(cudaMemcpy(host.data(), in + size_t(last) * n, bytes, cudaMemcpyDeviceToHost));
    std::vector<float> h_sums(segs);
    // The index is the first 4 bytes of either output type.
    std::vector<ArgKv> h_args(segs);
    CK(cudaMemcpy(h_sums.data(), sums, segs * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_args.data(), args, segs * sizeof(ArgKv), cudaMemcpyDeviceToHost));
    bool pass = true;
    for (long long s : {0LL, segs / 2, segs - 1})
    {
      const size_t b = sh.ragged ? size_t(sh.offsets[s]) : size_t(s) * sh.cols;
      const size_t e = sh.ragged ? size_t(sh.offsets[s + 1]) : b + sh.cols;
      if (e == b) continue;
      double sum = 0;
      size_t best = b;
      for (size_t i = b; i < e; ++i)
      {
        sum += host[i];
        if (host[i] > host[best]) best = i;
      }
      if (argmax)
      {
        pass &= size_t(h_args[s].key) == best - b;
      }
      else
      {
        pass &= std::fabs(h_sums[s] - sum) <= 1e-5 * sum + 1e-6;
      }
    }
    all_pass &= pass;
    std::printf("cub,%s,%s,%.3f,%.3f,%s,%s\n", op.c_str(), sh.name.c_str(), us, bytes / us / 1e3,
                pass ? "PASS" : "FAIL", use_offsets ? "offsets" : "fixed");
    std::fflush(stdout);
    for (auto& e : ev) CK(cudaEventDestroy(e));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(temp));
    CK(cudaFree(in));
    CK(cudaFree(sums));
    CK(cudaFree(args));
    if (d_off) CK(cudaFree(d_off));
  }
  return all_pass ? 0 : 1;
}
