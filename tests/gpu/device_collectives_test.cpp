// Collectives on device buffers and on a stream (issue 5): 1-4 ranks, all on
// GPU 0 (ringreduce lets ranks share a GPU; NCCL does not), through the C API
// as a framework calls it. Checks results against a double-precision
// reference (tests/common/typed_reference.hpp), that the calling thread does
// not wait for the stream, that a call runs after the work enqueued on the
// stream before it (a slow writer kernel) and before the work enqueued after
// it (a reader kernel), the legacy default stream, host buffers with a
// stream, the Async forms' requests, and the errors for buffers that cannot
// be staged (point-to-point, a device buffer beside a host one).
//
// The binary is its own launcher (tests/common/fork_ranks.hpp): exit 77 with
// the reason when no GPU can be used, else 1, 2, 3 and 4 ranks in turn
// (RR_GPU_TEST_RANKS="2 4" to choose). Rank 0 prints to the terminal; the
// others' output is shown when they fail.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../common/fork_ranks.hpp"
#include "../common/typed_reference.hpp"
#include "reduce/with_dtype.hpp"
#include "test_kernels.hpp"

namespace {

rrComm_t g_comm = nullptr;
int g_rank = 0;
int g_size = 1;
cudaStream_t g_stream = nullptr;

// Staging segments of 256 KiB: a few MiB already take many segments.
constexpr size_t kSegmentBytes = size_t{256} << 10;
constexpr uint8_t kPoison = 0xCD;
constexpr size_t kGuardBytes = 16;

#define ASSERT_CUDA(call)                                                                  \
  do {                                                                                     \
    cudaError_t rr_error_ = (call);                                                        \
    ASSERT_EQ(rr_error_, cudaSuccess) << #call << ": " << cudaGetErrorString(rr_error_);   \
  } while (0)

#define ASSERT_RR(call) ASSERT_EQ((call), rrSuccess) << #call << ": " << rrGetLastError(g_comm)

const rrDataType_t kTypes[] = {rrInt8, rrUint8, rrInt32, rrUint32, rrInt64, rrUint64,
                               rrFloat16, rrBfloat16, rrFloat32, rrFloat64};
const rrRedOp_t kOps[] = {rrSum, rrProd, rrMax, rrMin, rrAvg, rrBand, rrBor, rrBxor};

// The bitwise ops exist for the integer types only.
bool defined(rrDataType_t dtype, rrRedOp_t op) {
  const bool bitwise = op == rrBand || op == rrBor || op == rrBxor;
  const bool floating = dtype == rrFloat16 || dtype == rrBfloat16 || dtype == rrFloat32 || dtype == rrFloat64;
  return !(bitwise && floating);
}

size_t dtype_size(rrDataType_t dtype) {
  size_t bytes = 0;
  rr::reduce::with_dtype(dtype, [&](auto tag) { bytes = sizeof(tag); });
  return bytes;
}

// Device memory, poisoned, with a guard after `bytes`. Writes finish before
// they return: the stream the tests use does not wait for the legacy default
// stream that cudaMemset and cudaMemcpy use.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) : bytes(bytes) {
    if (cudaMalloc(&data, bytes + kGuardBytes) != cudaSuccess) data = nullptr;
    if (data) cudaMemset(data, kPoison, bytes + kGuardBytes);
    cudaDeviceSynchronize();
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<uint8_t> read() const {
    std::vector<uint8_t> host(bytes + kGuardBytes);
    cudaMemcpy(host.data(), data, host.size(), cudaMemcpyDeviceToHost);
    return host;
  }
  void write(const std::vector<uint8_t>& host) {
    cudaMemcpy(data, host.data(), bytes, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
  }
  // As read(), on a stream that does not wait for the legacy default stream
  // (which read()'s cudaMemcpy does): what the memory holds now.
  std::vector<uint8_t> read_now() const {
    std::vector<uint8_t> host(bytes + kGuardBytes);
    cudaStream_t side = nullptr;
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    cudaMemcpyAsync(host.data(), data, host.size(), cudaMemcpyDeviceToHost, side);
    cudaStreamSynchronize(side);
    cudaStreamDestroy(side);
    return host;
  }
  uint8_t* at(size_t offset) const { return static_cast<uint8_t*>(data) + offset; }
  void* data = nullptr;
  size_t bytes;
};

bool guard_intact(const std::vector<uint8_t>& host, size_t bytes) {
  for (size_t k = 0; k < kGuardBytes; ++k) {
    if (host[bytes + k] != kPoison) return false;
  }
  return true;
}

// Waits for the stream and for the communicator to report no failure.
void finish_stream() {
  ASSERT_CUDA(cudaStreamSynchronize(g_stream));
  rrResult_t async = rrSuccess;
  ASSERT_RR(rrCommGetAsyncError(g_comm, &async));
  ASSERT_EQ(async, rrSuccess) << rrGetLastError(g_comm);
}

void check_device_allreduce(rrDataType_t dtype, rrRedOp_t op, size_t count, bool in_place, uint64_t seed,
                            cudaStream_t stream) {
  SCOPED_TRACE(std::string("allreduce dtype=") + std::to_string(dtype) + " op=" + std::to_string(op) + " count=" +
               std::to_string(count) + (in_place ? " in place" : " out of place") + " ranks=" + std::to_string(g_size));
  const size_t bytes = count * dtype_size(dtype);
  DeviceBuffer send(bytes), recv(bytes);
  ASSERT_TRUE(send.data && recv.data);
  std::vector<uint8_t> input(bytes + kGuardBytes, kPoison);
  rr::test::fill(dtype, op, g_rank, seed, input.data(), 0, count);
  send.write(input);
  DeviceBuffer& out = in_place ? send : recv;
  ASSERT_RR(rrAllReduce(send.data, out.data, count, dtype, op, g_comm, stream));
  if (stream == nullptr) {
    ASSERT_CUDA(cudaDeviceSynchronize());
  }
  finish_stream();
  const std::vector<uint8_t> result = out.read();
  EXPECT_TRUE(guard_intact(result, bytes)) << "wrote past count";
  if (!in_place) {
    EXPECT_EQ(0, std::memcmp(send.read().data(), input.data(), bytes)) << "the send buffer was modified";
  }
  std::string report;
  EXPECT_EQ(rr::test::count_wrong(dtype, op, g_size, seed, result.data(), 0, count, &report), 0u) << report;
}

TEST(DeviceAllReduce, EveryTypeAndOpMatchesDoubleReference) {
  uint64_t seed = 1;
  for (rrDataType_t dtype : kTypes) {
    for (rrRedOp_t op : kOps) {
      if (!defined(dtype, op)) continue;
      // One element, a few, and many segments with a short last one.
      for (size_t count : {size_t{1}, size_t{1031}, size_t{300007}}) {
        for (bool in_place : {false, true}) check_device_allreduce(dtype, op, count, in_place, ++seed, g_stream);
      }
    }
  }
}

TEST(DeviceAllReduce, ZeroElementsIsANoOp) {
  ASSERT_RR(rrAllReduce(nullptr, nullptr, 0, rrFloat32, rrSum, g_comm, g_stream));
  finish_stream();
}

TEST(DeviceAllReduce, NullStreamIsTheLegacyDefaultStream) {
  check_device_allreduce(rrFloat32, rrSum, 1 << 20, false, 77, nullptr);
}

TEST(DeviceAllReduce, LargeTensorThroughManySegments) {
  // 160 MiB of float32 and one more: 641 segments of 256 KiB through three
  // slots, about 2000 operations per staging stream issued at the call:
  // more than a stream's launch queue holds, so issuing blocks until the
  // host half (queued first) released enough of them.
  check_device_allreduce(rrFloat32, rrSum, (size_t{40} << 20) + 1, true, 78, g_stream);
}

// The writer kernel spins this long before it writes the input.
constexpr int kWriterDelayMs = 300;

TEST(StreamOrdering, KernelBeforeWritesInputKernelAfterReadsResult) {
  const size_t count = (size_t{3} << 20) + 5;  // several segments
  DeviceBuffer in(count * 4), out(count * 4), check(count * 4);
  ASSERT_TRUE(in.data && out.data && check.data);
  ASSERT_CUDA(rr::test::launch_slow_fill(static_cast<float*>(in.data), count, static_cast<float>(g_rank + 1),
                                         kWriterDelayMs, g_stream));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_RR(rrAllReduce(in.data, out.data, count, rrFloat32, rrSum, g_comm, g_stream));
  const auto returned = std::chrono::steady_clock::now();
  // The writer still runs: the call must not have waited for it.
  EXPECT_EQ(cudaStreamQuery(g_stream), cudaErrorNotReady) << "the call waited for the stream";
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(returned - start).count(), kWriterDelayMs)
      << "the calling thread blocked";
  ASSERT_CUDA(rr::test::launch_read(static_cast<float*>(check.data), static_cast<const float*>(out.data), count,
                                    g_stream));
  finish_stream();
  std::vector<float> host(count);
  ASSERT_CUDA(cudaMemcpy(host.data(), check.data, count * 4, cudaMemcpyDeviceToHost));
  const float expect = static_cast<float>(g_size * (g_size + 1) / 2);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += host[i] != expect ? 1 : 0;
  EXPECT_EQ(wrong, 0u) << "of " << count << " elements; expected " << expect << ", element 0 is " << host[0];
}

TEST(StreamOrdering, CallsOnOneStreamRunInIssueOrder) {
  // x <- x summed over ranks, ten times in place: N^10 only if each call
  // reads the previous one's result.
  const size_t count = 100003;
  DeviceBuffer x(count * 8);
  std::vector<double> ones(count, 1.0);
  ASSERT_CUDA(cudaMemcpy(x.data, ones.data(), count * 8, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaDeviceSynchronize());
  for (int k = 0; k < 10; ++k) ASSERT_RR(rrAllReduce(x.data, x.data, count, rrFloat64, rrSum, g_comm, g_stream));
  finish_stream();
  std::vector<double> host(count);
  ASSERT_CUDA(cudaMemcpy(host.data(), x.data, count * 8, cudaMemcpyDeviceToHost));
  const double expect = std::pow(static_cast<double>(g_size), 10);
  size_t wrong = 0;
  for (double v : host) wrong += v != expect ? 1 : 0;
  EXPECT_EQ(wrong, 0u) << "expected " << expect << ", element 0 is " << host[0];
}

TEST(StreamOrdering, PinnedHostBuffersWithAStream) {
  const size_t count = 200001;
  DeviceBuffer source(count * 4), result(count * 4);
  void* in = nullptr;
  void* out = nullptr;
  ASSERT_CUDA(cudaMallocHost(&in, count * 4));
  ASSERT_CUDA(cudaMallocHost(&out, count * 4));
  // The input reaches host memory only through the stream, after a slow kernel.
  ASSERT_CUDA(rr::test::launch_slow_fill(static_cast<float*>(source.data), count, static_cast<float>(g_rank + 1),
                                         kWriterDelayMs, g_stream));
  ASSERT_CUDA(cudaMemcpyAsync(in, source.data, count * 4, cudaMemcpyDeviceToHost, g_stream));
  ASSERT_RR(rrAllReduce(in, out, count, rrFloat32, rrSum, g_comm, g_stream));
  EXPECT_EQ(cudaStreamQuery(g_stream), cudaErrorNotReady) << "the call waited for the stream";
  ASSERT_CUDA(cudaMemcpyAsync(result.data, out, count * 4, cudaMemcpyHostToDevice, g_stream));
  finish_stream();
  std::vector<float> host(count);
  ASSERT_CUDA(cudaMemcpy(host.data(), result.data, count * 4, cudaMemcpyDeviceToHost));
  const float expect = static_cast<float>(g_size * (g_size + 1) / 2);
  size_t wrong = 0;
  for (float v : host) wrong += v != expect ? 1 : 0;
  EXPECT_EQ(wrong, 0u) << "expected " << expect << ", element 0 is " << host[0];
  cudaFreeHost(in);
  cudaFreeHost(out);
}

TEST(StreamOrdering, PageableHostBuffersWithAStream) {
  std::vector<int32_t> data(1000, g_rank + 1);
  ASSERT_RR(rrAllReduce(data.data(), data.data(), data.size(), rrInt32, rrSum, g_comm, g_stream));
  finish_stream();
  for (int32_t v : data) ASSERT_EQ(v, g_size * (g_size + 1) / 2);
}

TEST(DeviceCollectives, ReduceScatterAllGatherBroadcastReduce) {
  const size_t count = 70001;  // per rank block: several segments, a short last one
  const size_t n = static_cast<size_t>(g_size);
  uint64_t seed = 500;
  {
    SCOPED_TRACE("reduce-scatter");
    DeviceBuffer send(count * n * 4), recv(count * 4);
    std::vector<uint8_t> input(count * n * 4);
    rr::test::fill(rrFloat32, rrSum, g_rank, ++seed, input.data(), 0, count * n);
    send.write(input);
    ASSERT_RR(rrReduceScatter(send.data, recv.data, count, rrFloat32, rrSum, g_comm, g_stream));
    finish_stream();
    const std::vector<uint8_t> result = recv.read();
    EXPECT_TRUE(guard_intact(result, count * 4));
    std::string report;
    EXPECT_EQ(rr::test::count_wrong(rrFloat32, rrSum, g_size, seed, result.data(), static_cast<size_t>(g_rank) * count,
                                    count, &report), 0u) << report;
  }
  {
    SCOPED_TRACE("all-gather");
    DeviceBuffer send(count * 2), recv(count * n * 2);
    std::vector<uint8_t> input(count * 2);
    rr::test::fill(rrBfloat16, rrSum, g_rank, ++seed, input.data(), 0, count);
    send.write(input);
    ASSERT_RR(rrAllGather(send.data, recv.data, count, rrBfloat16, g_comm, g_stream));
    finish_stream();
    const std::vector<uint8_t> result = recv.read();
    EXPECT_TRUE(guard_intact(result, count * n * 2));
    std::string report;
    size_t wrong = 0;
    for (int r = 0; r < g_size; ++r) {
      wrong += rr::test::count_not_input(rrBfloat16, rrSum, r, seed, result.data() + static_cast<size_t>(r) * count * 2,
                                         0, count, &report);
    }
    EXPECT_EQ(wrong, 0u) << report;
  }
  for (int root = 0; root < g_size; ++root) {
    SCOPED_TRACE("broadcast and reduce, root " + std::to_string(root));
    DeviceBuffer buf(count * 8), out(count * 8);
    std::vector<uint8_t> input(count * 8);
    rr::test::fill(rrInt64, rrMax, g_rank, ++seed, input.data(), 0, count);
    buf.write(input);
    ASSERT_RR(rrReduce(buf.data, out.data, count, rrInt64, rrMax, root, g_comm, g_stream));
    ASSERT_RR(rrBroadcast(out.data, out.data, count, rrInt64, root, g_comm, g_stream));
    finish_stream();
    // The root reduced, then sent its result to everyone.
    const std::vector<uint8_t> result = out.read();
    EXPECT_TRUE(guard_intact(result, count * 8));
    std::string report;
    EXPECT_EQ(rr::test::count_wrong(rrInt64, rrMax, g_size, seed, result.data(), 0, count, &report), 0u) << report;
  }
}

TEST(DeviceCollectives, GatherScatterAllToAll) {
  const size_t count = 70001;  // per rank block: several segments, a short last one
  const size_t n = static_cast<size_t>(g_size);
  uint64_t seed = 900;
  for (int root = 0; root < g_size; ++root) {
    SCOPED_TRACE("gather and scatter, root " + std::to_string(root));
    const bool is_root = g_rank == root;
    DeviceBuffer mine(count * 2), all(count * n * 2), back(count * 2);
    std::vector<uint8_t> input(count * 2 + kGuardBytes, kPoison);
    rr::test::fill(rrFloat16, rrSum, g_rank, ++seed, input.data(), 0, count);
    mine.write(input);
    // Gathered on the root, then scattered back from there: each rank gets its
    // own block again. recvbuff of gather and sendbuff of scatter are the root's.
    ASSERT_RR(rrGather(mine.data, is_root ? all.data : nullptr, count, rrFloat16, root, g_comm, g_stream));
    ASSERT_RR(rrScatter(is_root ? all.data : nullptr, back.data, count, rrFloat16, root, g_comm, g_stream));
    finish_stream();
    if (is_root) {
      const std::vector<uint8_t> gathered = all.read();
      EXPECT_TRUE(guard_intact(gathered, count * n * 2));
      std::string report;
      size_t wrong = 0;
      for (int r = 0; r < g_size; ++r) {
        const uint8_t* from_r = gathered.data() + static_cast<size_t>(r) * count * 2;
        wrong += rr::test::count_not_input(rrFloat16, rrSum, r, seed, from_r, 0, count, &report);
      }
      EXPECT_EQ(wrong, 0u) << report;
    }
    const std::vector<uint8_t> result = back.read();
    EXPECT_TRUE(guard_intact(result, count * 2));
    EXPECT_EQ(0, std::memcmp(result.data(), input.data(), count * 2)) << "scatter did not return this rank's block";
  }
  {
    SCOPED_TRACE("all-to-all");
    DeviceBuffer send(count * n * 4), recv(count * n * 4);
    std::vector<uint8_t> input(count * n * 4);
    rr::test::fill(rrInt32, rrSum, g_rank, ++seed, input.data(), 0, count * n);
    send.write(input);
    ASSERT_RR(rrAllToAll(send.data, recv.data, count, rrInt32, g_comm, g_stream));
    finish_stream();
    const std::vector<uint8_t> result = recv.read();
    EXPECT_TRUE(guard_intact(result, count * n * 4));
    // Block p here is block g_rank of rank p's sendbuff.
    std::string report;
    size_t wrong = 0;
    for (int p = 0; p < g_size; ++p) {
      wrong += rr::test::count_not_input(rrInt32, rrSum, p, seed, result.data() + static_cast<size_t>(p) * count * 4,
                                         static_cast<size_t>(g_rank) * count, count, &report);
    }
    EXPECT_EQ(wrong, 0u) << report;
  }
}

// The Async forms on device buffers: ordered on the legacy default stream,
// their requests finished once the result is in place (read with no
// synchronisation after rrWait / rrTest).
TEST(DeviceAsync, RequestsFinishWithTheResultInPlace) {
  uint64_t seed = 500;
  for (rrDataType_t dtype : {rrFloat32, rrBfloat16, rrInt64}) {
    // One element, and many segments of 256 KiB: finished early, the last
    // ones would read stale.
    for (size_t count : {size_t{1}, (size_t{3} << 20) + 1}) {
      SCOPED_TRACE("dtype=" + std::to_string(dtype) + " count=" + std::to_string(count));
      const size_t bytes = count * dtype_size(dtype);
      DeviceBuffer buffer(bytes);
      ASSERT_TRUE(buffer.data);
      std::vector<uint8_t> input(bytes + kGuardBytes, kPoison);
      rr::test::fill(dtype, rrSum, g_rank, ++seed, input.data(), 0, count);
      buffer.write(input);
      rrRequest_t request = nullptr;
      ASSERT_RR(rrAllReduceAsync(buffer.data, buffer.data, count, dtype, rrSum, g_comm, &request));
      if (count == 1) {
        int done = 0;
        while (!done) ASSERT_RR(rrTest(request, &done));
      } else {
        ASSERT_RR(rrWait(request));
      }
      const std::vector<uint8_t> result = buffer.read_now();
      EXPECT_TRUE(guard_intact(result, bytes)) << "wrote past count";
      std::string report;
      EXPECT_EQ(rr::test::count_wrong(dtype, rrSum, g_size, seed, result.data(), 0, count, &report), 0u) << report;
    }
  }
  // Nothing to move: a request all the same, finished.
  rrRequest_t empty = nullptr;
  ASSERT_RR(rrAllReduceAsync(nullptr, nullptr, 0, rrFloat32, rrSum, g_comm, &empty));
  ASSERT_RR(rrWait(empty));
  // Two in flight, out of place, waited in the other order (the queue ends
  // them in issue order: this proves only that nothing waits for the other).
  const size_t count = 4099;
  DeviceBuffer a(count * 4), b(count * 4), c(count * 4);
  std::vector<uint8_t> input(count * 4 + kGuardBytes, kPoison);
  rr::test::fill(rrFloat32, rrMax, g_rank, 900, input.data(), 0, count);
  a.write(input);
  rrRequest_t first = nullptr, second = nullptr;
  ASSERT_RR(rrAllReduceAsync(a.data, b.data, count, rrFloat32, rrMax, g_comm, &first));
  ASSERT_RR(rrBroadcastAsync(a.data, c.data, count, rrFloat32, g_size - 1, g_comm, &second));
  ASSERT_RR(rrWait(second));
  ASSERT_RR(rrWait(first));
  std::string report;
  EXPECT_EQ(rr::test::count_wrong(rrFloat32, rrMax, g_size, 900, b.read_now().data(), 0, count, &report), 0u) << report;
  std::vector<uint8_t> root(count * 4 + kGuardBytes, kPoison);
  rr::test::fill(rrFloat32, rrMax, g_size - 1, 900, root.data(), 0, count);
  EXPECT_EQ(0, std::memcmp(c.read_now().data(), root.data(), count * 4)) << "broadcast from the last rank";
  rrResult_t async = rrSuccess;
  ASSERT_RR(rrCommGetAsyncError(g_comm, &async));
  EXPECT_EQ(async, rrSuccess) << rrGetLastError(g_comm);
}

TEST(DeviceErrors, MixedAsyncAndPointToPointAreRefusedNamingTheBuffer) {
  DeviceBuffer device(1024);
  std::vector<float> host(256);
  ASSERT_EQ(rrAllReduce(device.data, host.data(), 256, rrFloat32, rrSum, g_comm, g_stream), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("sendbuff is device memory but recvbuff is host memory"),
            std::string::npos) << rrGetLastError(g_comm);
  rrRequest_t request = nullptr;
  ASSERT_EQ(rrSend(device.data, 256, rrFloat32, (g_rank + 1) % g_size, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("sendbuff is device memory"), std::string::npos)
      << rrGetLastError(g_comm);
  // rrAllToAllv takes host buffers only, on a stream or not, Async or not.
  const std::vector<size_t> ones(static_cast<size_t>(g_size), 1), displs = [&] {
    std::vector<size_t> d(static_cast<size_t>(g_size));
    for (size_t p = 0; p < d.size(); ++p) d[p] = p;
    return d;
  }();
  DeviceBuffer device_recv(1024);
  ASSERT_EQ(rrAllToAllv(device.data, ones.data(), displs.data(), device_recv.data, ones.data(), displs.data(),
                        rrFloat32, g_comm, g_stream),
            rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("rrAllToAllv: sendbuff is device memory"), std::string::npos)
      << rrGetLastError(g_comm);
  ASSERT_EQ(rrAllToAllvAsync(host.data(), ones.data(), displs.data(), device_recv.data, ones.data(), displs.data(),
                             rrFloat32, g_comm, &request),
            rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("recvbuff is device memory"), std::string::npos)
      << rrGetLastError(g_comm);
  // None of them broke the communicator.
  rrResult_t async = rrSuccess;
  ASSERT_RR(rrCommGetAsyncError(g_comm, &async));
  EXPECT_EQ(async, rrSuccess);
}

TEST(DeviceErrors, ACapturedStreamIsRefused) {
  DeviceBuffer buffer(1024);
  ASSERT_TRUE(buffer.data);
  ASSERT_CUDA(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeRelaxed));
  const rrResult_t result = rrAllReduce(buffer.data, buffer.data, 256, rrFloat32, rrSum, g_comm, g_stream);
  const std::string error = rrGetLastError(g_comm);
  cudaGraph_t graph = nullptr;
  ASSERT_CUDA(cudaStreamEndCapture(g_stream, &graph));
  if (graph) cudaGraphDestroy(graph);
  EXPECT_EQ(result, rrInvalidUsage);
  EXPECT_NE(error.find("captured into a CUDA graph"), std::string::npos) << error;
  // Refused before anything was enqueued: the communicator still works.
  rrResult_t async = rrSuccess;
  ASSERT_RR(rrCommGetAsyncError(g_comm, &async));
  EXPECT_EQ(async, rrSuccess);
  check_device_allreduce(rrFloat32, rrSum, 1000, false, 97, g_stream);
}

// ---------------------------------------------------------------------------
// One rank.

class CommEnvironment : public ::testing::Environment {
 public:
  CommEnvironment(std::string url, int rank, int size) : url_(std::move(url)), rank_(rank), size_(size) {}
  void SetUp() override {
    ASSERT_CUDA(cudaSetDevice(0));
    ASSERT_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    rrConfig_t config = RR_CONFIG_INITIALIZER;
    config.gpu_segment_bytes = kSegmentBytes;
    ASSERT_EQ(rrCommInitUrl(&g_comm, url_.c_str(), size_, rank_, &config), rrSuccess) << rrGetLastError(nullptr);
    g_rank = rank_;
    g_size = size_;
  }
  void TearDown() override {
    if (g_comm) {
      EXPECT_EQ(rrCommDestroy(g_comm), rrSuccess);
    }
    if (g_stream) cudaStreamDestroy(g_stream);
  }

 private:
  std::string url_;
  int rank_, size_;
};

int run_rank(int argc, char** argv, const std::string& url, int rank, int size) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new CommEnvironment(url, rank, size));
  return RUN_ALL_TESTS();
}

}  // namespace

int main(int argc, char** argv) {
  rr::test::RankEnv env;
  if (rr::test::this_is_a_rank(&env)) return run_rank(argc, argv, env.url, env.rank, env.size);
  const int probed = rr::test::probe_gpu();
  if (probed != 0) return probed;
  char dir_template[] = "/tmp/rr-gpu-test-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (!dir) {
    std::perror("mkdtemp");
    return 1;
  }
  int failed = 0;
  for (int size : rr::test::rank_counts("RR_GPU_TEST_RANKS", {1, 2, 3, 4})) {
    std::printf("== %d rank(s) on GPU 0\n", size);
    failed += rr::test::fork_exec_ranks(size, argv, dir, 240);
  }
  std::printf("%s (logs of ranks > 0 in %s)\n", failed == 0 ? "every rank count passed" : "FAILED", dir);
  return failed == 0 ? 0 : 1;
}
