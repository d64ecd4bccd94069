// A program that uses only host memory gets no CUDA context from ringreduce
// (lib/memory/memory_kind.cpp): classifying its buffers must not create one
// on GPU 0 (hundreds of MiB there, and time). Once the program makes one
// itself, device buffers are recognised and staged. One rank, GPU 0.
//
// Own main(): it checks for a GPU in a child process (tests/common/
// fork_ranks.hpp: exit 77 without one), so that this process has touched
// nothing of CUDA when the first test runs; the tests run in this order.

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <vector>

#include "../common/fork_ranks.hpp"

namespace {

rrComm_t g_comm = nullptr;

// Whether GPU 0's primary context is active, asked of the driver (which
// creates nothing to answer).
bool primary_context_active() {
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*get_state)(CUdevice, unsigned int*, int*) = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuDeviceGet", reinterpret_cast<void**>(&device_get), 12000,
                                             cudaEnableDefault, &found),
            cudaSuccess);
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", reinterpret_cast<void**>(&get_state),
                                             12000, cudaEnableDefault, &found),
            cudaSuccess);
  if (!device_get || !get_state) return true;
  CUdevice device = 0;
  unsigned int flags = 0;
  int active = 1;
  EXPECT_EQ(device_get(&device, 0), CUDA_SUCCESS);
  EXPECT_EQ(get_state(device, &flags, &active), CUDA_SUCCESS);
  return active != 0;
}

TEST(HostContext, HostBuffersMakeNoContext) {
  ASSERT_FALSE(primary_context_active()) << "a context existed before the test";
  rrUniqueId id;
  ASSERT_EQ(rrGetUniqueId(&id), rrSuccess);
  ASSERT_EQ(rrCommInitRank(&g_comm, 1, id, 0), rrSuccess) << rrGetLastError(nullptr);
  std::vector<float> data(4097, 1.5f);
  ASSERT_EQ(rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, g_comm, nullptr), rrSuccess)
      << rrGetLastError(g_comm);
  ASSERT_EQ(rrBroadcast(data.data(), data.data(), data.size(), rrFloat32, 0, g_comm, nullptr), rrSuccess);
  EXPECT_EQ(data[4096], 1.5f);
  EXPECT_FALSE(primary_context_active()) << "collectives on host buffers made a CUDA context on GPU 0";
}

TEST(HostContext, DeviceBuffersAreRecognisedOnceTheProgramMadeAContext) {
  ASSERT_NE(g_comm, nullptr);
  const size_t count = 4097;
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, count * sizeof(float)), cudaSuccess);
  EXPECT_TRUE(primary_context_active());
  std::vector<float> data(count, 2.5f);
  ASSERT_EQ(cudaMemcpy(device, data.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  // Device memory on the legacy stream: staged (as host memory it would
  // fault on the host).
  ASSERT_EQ(rrAllReduce(device, device, count, rrFloat32, rrAvg, g_comm, nullptr), rrSuccess)
      << rrGetLastError(g_comm);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  rrResult_t async = rrSuccess;
  ASSERT_EQ(rrCommGetAsyncError(g_comm, &async), rrSuccess);
  EXPECT_EQ(async, rrSuccess) << rrGetLastError(g_comm);
  std::vector<float> back(count, 0.0f);
  ASSERT_EQ(cudaMemcpy(back.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, data);
  EXPECT_EQ(rrCommDestroy(g_comm), rrSuccess);
  g_comm = nullptr;
  cudaFree(device);
}

}  // namespace

int main(int argc, char** argv) {
  const int probed = rr::test::probe_gpu();
  if (probed != 0) return probed;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
