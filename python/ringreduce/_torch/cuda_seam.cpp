// The device path's CUDA calls (device_seam.hpp) over torch's own CUDA
// runtime: its current streams, its caching allocator, its device-aware
// futures. Only the CUDA build of the backend has it (RR_TORCH_CUDA).

#include "device_seam.hpp"

#if RR_TORCH_CUDA

#include <ATen/core/jit_type.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <string>

#include "errors.hpp"

namespace ringreduce_torch {

namespace {

void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    throw Error(rrUnhandledCudaError, std::string("ringreduce: ") + what + ": " + cudaGetErrorName(error) + " (" +
                                          cudaGetErrorString(error) + ")");
  }
}

class CudaSeam : public DeviceSeam {
 public:
  void* current_stream(c10::Device device) override {
    return c10::cuda::getCurrentCUDAStream(device.index()).stream();
  }

  void* side_stream(c10::Device device) override {
    return c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index()).stream();
  }

  void run_on(c10::Device device, void* stream, const std::function<void()>& fn) override {
    const c10::cuda::CUDAStreamGuard guard(
        c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream), device.index()));
    fn();
  }

  bool capturing(void* stream) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check_cuda(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status), "cudaStreamIsCapturing");
    return status != cudaStreamCaptureStatusNone;
  }

  void record_stream(const at::Tensor& tensor, void* stream) override {
    const c10::cuda::CUDAStream on =
        c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream), tensor.device().index());
    c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), on);
  }

  rrResult_t enqueue(c10::Device device, void* stream, const std::function<rrResult_t(void* stream)>& call) override {
    const c10::cuda::CUDAGuard guard(device.index());
    return call(stream);
  }

  Event record_event(c10::Device device, void* stream) override {
    const c10::cuda::CUDAGuard guard(device.index());
    cudaEvent_t event = nullptr;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    Event owned(event, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
    check_cuda(cudaEventRecord(event, static_cast<cudaStream_t>(stream)), "cudaEventRecord");
    return owned;
  }

  void stream_wait(void* stream, const Event& event) override {
    check_cuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event.get()), 0),
               "cudaStreamWaitEvent");
  }

  bool reached(const Event& event) override {
    const cudaError_t state = cudaEventQuery(static_cast<cudaEvent_t>(event.get()));
    if (state == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: clear it
      return false;
    }
    check_cuda(state, "cudaEventQuery");
    return true;
  }

  c10::intrusive_ptr<c10::ivalue::Future> completed_future(c10::Device device,
                                                          const std::vector<at::Tensor>& outputs) override {
    // markCompleted records the future's own events on each device's
    // current stream: the one the call was ordered on (run_on made it
    // current, on the tensors' device).
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                           std::vector<c10::Device>{device});
    future->markCompleted(c10::IValue(outputs));
    return future;
  }
};

}  // namespace

std::shared_ptr<DeviceSeam> cuda_seam() {
  static const std::shared_ptr<DeviceSeam> seam = std::make_shared<CudaSeam>();
  return seam;
}

}  // namespace ringreduce_torch

#else

namespace ringreduce_torch {

std::shared_ptr<DeviceSeam> cuda_seam() { return nullptr; }

}  // namespace ringreduce_torch

#endif
