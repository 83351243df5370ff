// cub_first_sum.cu -- CUB counterpart of examples/first_sum.rs: the cold start of a fresh process, i.e.
// context creation and the first 2^20-element f32 sum. scripts/cold-start.sh runs it once per process.
//
// Build:  nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -o cub_first_sum cub_first_sum.cu
//         (sm_90 SASS only, as a real CUB program would ship; plain -arch=sm_90 would embed compute_90 PTX too)
//
// Output: one line on stdout,
//   first_sum_cub open_ms=... upload_ms=... sum_ms=... total_ms=... result=correct info=...
// where open_ms is cudaFree(0) (context creation), upload_ms cudaMalloc + cudaMemcpy of the input, sum_ms the
// whole first cub::DeviceReduce::Sum (temp-storage query, cudaMalloc of the temp storage, the sum, copy of the
// result to the host) and total_ms the time since the start of main. Exit code 1 on a wrong sum or a failed
// CUDA call (file:line and the error on stderr).

#include <cub/cub.cuh>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

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

using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t0)
{
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int main()
{
  const auto start = Clock::now();
  constexpr int n  = 1 << 20;

  auto t = Clock::now();
  CK(cudaFree(0));
  const double open_ms = ms_since(t);

  std::vector<float> host(n);
  for (int i = 0; i < n; ++i)
  {
    host[i] = static_cast<float>(i % 7);
  }
  t         = Clock::now();
  float* in = nullptr;
  CK(cudaMalloc(&in, n * sizeof(float)));
  CK(cudaMemcpy(in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const double upload_ms = ms_since(t);

  t          = Clock::now();
  float* out = nullptr;
  CK(cudaMalloc(&out, sizeof(float)));
  void* temp        = nullptr;
  size_t temp_bytes = 0;
  CK(cub::DeviceReduce::Sum(temp, temp_bytes, in, out, n));
  CK(cudaMalloc(&temp, temp_bytes));
  CK(cub::DeviceReduce::Sum(temp, temp_bytes, in, out, n));
  float got = 0.0f;
  CK(cudaMemcpy(&got, out, sizeof(float), cudaMemcpyDeviceToHost));
  const double sum_ms   = ms_since(t);
  const double total_ms = ms_since(start);

  // Integers below 2^24 with every partial sum below 2^24: the f32 sum is exact in any order.
  double expected = 0.0;
  for (float x : host)
  {
    expected += x;
  }
  if (double(got) != expected)
  {
    std::printf("first_sum_cub error: wrong sum %.9g, expected %.9g\n", double(got), expected);
    return 1;
  }

  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("first_sum_cub open_ms=%.3f upload_ms=%.3f sum_ms=%.3f total_ms=%.3f result=correct info=%s cc=%d.%d "
              "cub=%d.%d.%d\n",
              open_ms, upload_ms, sum_ms, total_ms, prop.name, prop.major, prop.minor, CUB_MAJOR_VERSION,
              CUB_MINOR_VERSION, CUB_SUBMINOR_VERSION);

  CK(cudaFree(temp));
  CK(cudaFree(out));
  CK(cudaFree(in));
  return 0;
}
