// NCCL from the CUDA toolkit, driven as nccl-tests drives it: device buffers
// from cudaMalloc, one non-blocking stream per rank, every iteration of a row
// enqueued and the stream synchronized once after the loop (-z 1: after each
// call). The host buffers rr-bench checks are mirrored to the device before a
// row and the first call's result is copied back for the check, outside the
// timing.
//
// NCCL needs a GPU of its own per rank: it refuses two ranks on one device.
// nccl_unavailable() says, before any NCCL call, why this rank cannot run it.

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "backend.h"

namespace rrbench {

namespace {

void check_cuda(cudaError_t code, const std::string& what) {
  if (code != cudaSuccess) throw BackendError(what + " failed: " + cudaGetErrorString(code));
}

void check_nccl(ncclResult_t code, const std::string& what) {
  if (code != ncclSuccess) {
    std::string text = what + " failed: " + ncclGetErrorString(code);
    const char* last = ncclGetLastError(nullptr);
    if (last != nullptr && *last != '\0') text += std::string(": ") + last;
    throw BackendError(text);
  }
}

// rrbench's DataType and RedOp follow ncclDataType_t's and ncclRedOp_t's order
// (RedOp's bitwise ops, past ncclAvg, are refused by unsupported()).
ncclDataType_t to_nccl(DataType type) { return static_cast<ncclDataType_t>(static_cast<int>(type)); }
ncclRedOp_t to_nccl(RedOp op) { return static_cast<ncclRedOp_t>(static_cast<int>(op)); }

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  return *end == '\0' && parsed >= 0 && parsed <= 1 << 20 ? static_cast<int>(parsed) : fallback;
}

// This rank's index among the ranks of its host, and how many there are
// (rr-run and mpirun say; without them every rank is taken to share a host).
void local_placement(int rank, int nranks, int* local_rank, int* local_ranks) {
  *local_rank = env_int("LOCAL_RANK", rank);
  *local_ranks = env_int("LOCAL_WORLD_SIZE", nranks);
}

// "NCCL_ALGO=Ring NCCL_PROTO=Simple", or "NCCL's tuner" when none is set.
std::string nccl_settings() {
  std::string text;
  for (const char* name : {"NCCL_ALGO", "NCCL_PROTO", "NCCL_NTHREADS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
                           "NCCL_BUFFSIZE", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NET", "NCCL_IB_DISABLE"}) {
    if (const char* value = std::getenv(name)) text += std::string(text.empty() ? "" : " ") + name + "=" + value;
  }
  return text.empty() ? "NCCL's own choice of algorithm and protocol (no NCCL_ALGO/NCCL_PROTO set)" : text;
}

// A host region mirrored in device memory, grown only.
struct DeviceMirror {
  void* device = nullptr;
  std::size_t capacity = 0;

  ~DeviceMirror() {
    if (device != nullptr) cudaFree(device);
  }
  void reserve(std::size_t bytes) {
    if (bytes <= capacity) return;
    if (device != nullptr) check_cuda(cudaFree(device), "cudaFree");
    device = nullptr;
    capacity = 0;
    check_cuda(cudaMalloc(&device, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
    capacity = bytes;
  }
};

class NcclLibrary : public Library {
 public:
  NcclLibrary(Library* control, int device, bool blocking)
      : rank_(control->rank()), nranks_(control->nranks()), device_(device), blocking_(blocking) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
    // Rank 0 makes the id; the control library carries it to the others.
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    control->broadcast_from_zero(&id, sizeof id);
    check_nccl(ncclCommInitRank(&comm_, nranks_, id, rank_), "ncclCommInitRank");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  ~NcclLibrary() override {
    // Every row waits for its calls, so work still queued here means a row
    // failed: abort rather than wait on kernels whose peers may be gone.
    const bool idle = stream_ == nullptr || cudaStreamQuery(stream_) == cudaSuccess;
    if (comm_ != nullptr && idle) {
      ncclCommDestroy(comm_);
    } else if (comm_ != nullptr) {
      ncclCommAbort(comm_);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  std::string description() const override {
    int version = 0;
    ncclGetVersion(&version);
    cudaDeviceProp properties;
    std::string gpu = "GPU " + std::to_string(device_);
    if (cudaGetDeviceProperties(&properties, device_) == cudaSuccess) gpu += " (" + std::string(properties.name) + ")";
    return "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100) + ", rank 0 on " + gpu + "; " + nccl_settings();
  }
  std::unique_ptr<Backend> make_backend(const std::string& variant) override;

  // NCCL is never the control plane: rr-bench's own choice prefers the
  // libraries that bootstrapped it. These serve only if asked.
  void barrier() override {
    double token = 0;
    allreduce_sum(&token, 1);
  }
  void allreduce_max(double* values, std::size_t n) override { control_allreduce(values, n, ncclMax); }
  void allreduce_sum(double* values, std::size_t n) override { control_allreduce(values, n, ncclSum); }

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }

  // cudaStreamSynchronize, watching NCCL's asynchronous errors meanwhile (as
  // nccl-tests does): a peer that failed would otherwise leave this rank's
  // kernels, and this wait, spinning for ever. On an error the communicator is
  // aborted, which ends its kernels, and the error says so.
  void synchronize() {
    for (;;) {
      const cudaError_t state = cudaStreamQuery(stream_);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) check_cuda(state, "cudaStreamQuery");
      if (comm_ == nullptr) throw BackendError("NCCL communicator already aborted after an asynchronous error");
      ncclResult_t async = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        check_nccl(async, "NCCL on rank " + std::to_string(rank_) + " (asynchronous error; communicator aborted)");
      }
      std::this_thread::yield();
    }
  }

  // A host-to-device copy complete before the next NCCL call: on NCCL's own
  // (non-blocking) stream, which a legacy-stream cudaMemcpy from pageable
  // memory would not be ordered with.
  void to_device(void* dst, const void* src, std::size_t bytes) {
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (input to device)");
    synchronize();
  }

 private:
  void control_allreduce(double* values, std::size_t n, ncclRedOp_t op) {
    scratch_.reserve(n * sizeof(double));
    to_device(scratch_.device, values, n * sizeof(double));
    check_nccl(ncclAllReduce(scratch_.device, scratch_.device, n, ncclFloat64, op, comm_, stream_), "ncclAllReduce");
    synchronize();
    check_cuda(cudaMemcpy(values, scratch_.device, n * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

  int rank_;
  int nranks_;
  int device_;
  bool blocking_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceMirror scratch_;
};

class NcclBackend : public Backend {
 public:
  NcclBackend(NcclLibrary* library, bool blocking) : library_(library), blocking_(blocking) {}

  std::string name() const override { return "nccl"; }
  std::string settings() const override {
    return std::string("ncclAllReduce and friends on cudaMalloc buffers, one non-blocking stream, ") +
           (blocking_ ? "synchronized after every call (-z 1)" : "a row's calls enqueued, synchronized once after them") +
           "; " + nccl_settings();
  }
  std::string unsupported(const Collective& coll, DataType type, RedOp op) const override {
    (void)coll;
    (void)type;
    if (is_bitwise(op)) return "NCCL has no bitwise reductions";
    return {};  // NCCL has every other type, operator and collective rr-bench runs
  }

  // The row's host buffers, as the device sees them: out of place a send
  // and a receive region, in place one region holding both (NCCL's offsets).
  void prepare(const CallArgs& a) override {
    const std::size_t element = type_size(a.type);
    const auto* send = static_cast<const unsigned char*>(a.send);
    auto* recv = static_cast<unsigned char*>(a.recv);
    const std::size_t send_bytes = a.send_count * element;
    const std::size_t recv_bytes = a.recv_count * element;
    if (a.in_place) {
      host_base_ = std::min<unsigned char*>(const_cast<unsigned char*>(send), recv);
      host_bytes_ = static_cast<std::size_t>(
          std::max(send + send_bytes, static_cast<const unsigned char*>(recv) + recv_bytes) - host_base_);
      recv_.reserve(host_bytes_);
      device_recv_ = static_cast<unsigned char*>(recv_.device) + (recv - host_base_);
      device_send_ = static_cast<unsigned char*>(recv_.device) + (send - host_base_);
    } else {
      host_base_ = recv;
      host_bytes_ = recv_bytes;
      send_.reserve(send_bytes);
      recv_.reserve(recv_bytes);
      device_send_ = send_.device;
      device_recv_ = recv_.device;
      library_->to_device(send_.device, send, send_bytes);
    }
    // The receive side carries rr-bench's poison (and, in place, the input).
    library_->to_device(recv_.device, host_base_, host_bytes_);
  }

  void run(const CallArgs& a) override {
    ncclComm_t comm = library_->comm();
    cudaStream_t stream = library_->stream();
    const ncclDataType_t type = to_nccl(a.type);
    switch (a.coll->kind) {
      case CollKind::kAllReduce:
        check_nccl(ncclAllReduce(device_send_, device_recv_, a.count, type, to_nccl(a.op), comm, stream),
                   "ncclAllReduce");
        break;
      case CollKind::kReduceScatter:
        check_nccl(ncclReduceScatter(device_send_, device_recv_, a.recv_count, type, to_nccl(a.op), comm, stream),
                   "ncclReduceScatter");
        break;
      case CollKind::kAllGather:
        check_nccl(ncclAllGather(device_send_, device_recv_, a.send_count, type, comm, stream), "ncclAllGather");
        break;
      case CollKind::kBroadcast:
        check_nccl(ncclBroadcast(device_send_, device_recv_, a.count, type, a.root, comm, stream), "ncclBroadcast");
        break;
      case CollKind::kReduce:
        check_nccl(ncclReduce(device_send_, device_recv_, a.count, type, to_nccl(a.op), a.root, comm, stream),
                   "ncclReduce");
        break;
      case CollKind::kAllToAll:
        check_nccl(ncclAlltoAll(device_send_, device_recv_, a.count / static_cast<std::size_t>(a.nranks), type, comm,
                                stream),
                   "ncclAlltoAll");
        break;
      case CollKind::kSendRecv: {
        // nccl-tests' sendrecv: to the right neighbour, from the left one.
        const int right = (a.rank + 1) % a.nranks;
        const int left = (a.rank + a.nranks - 1) % a.nranks;
        check_nccl(ncclGroupStart(), "ncclGroupStart");
        ncclResult_t sent = ncclSend(device_send_, a.count, type, right, comm, stream);
        ncclResult_t received = ncclRecv(device_recv_, a.count, type, left, comm, stream);
        check_nccl(ncclGroupEnd(), "ncclGroupEnd");
        check_nccl(sent, "ncclSend");
        check_nccl(received, "ncclRecv");
        break;
      }
    }
    if (blocking_) wait();
  }

  void wait() override { library_->synchronize(); }

  void fetch_result(const CallArgs& a) override {
    (void)a;
    wait();
    check_cuda(cudaMemcpy(host_base_, recv_.device, host_bytes_, cudaMemcpyDeviceToHost),
               "cudaMemcpy (result to host)");
  }

 private:
  NcclLibrary* library_;
  bool blocking_;
  DeviceMirror send_;
  DeviceMirror recv_;
  void* device_send_ = nullptr;
  void* device_recv_ = nullptr;
  unsigned char* host_base_ = nullptr;
  std::size_t host_bytes_ = 0;
};

std::unique_ptr<Backend> NcclLibrary::make_backend(const std::string& variant) {
  if (variant == "nccl") return std::make_unique<NcclBackend>(this, blocking_);
  throw BackendError("nccl has no backend variant '" + variant + "'");
}

}  // namespace

std::string nccl_unavailable(int rank, int nranks, int* device) {
  int devices = 0;
  const cudaError_t code = cudaGetDeviceCount(&devices);
  if (code != cudaSuccess || devices == 0) {
    return std::string("no GPU on rank ") + std::to_string(rank) + "'s host (cudaGetDeviceCount: " +
           (code != cudaSuccess ? cudaGetErrorString(code) : "0 devices") + ")";
  }
  int local_rank = 0;
  int local_ranks = 0;
  local_placement(rank, nranks, &local_rank, &local_ranks);
  if (local_ranks > devices) {
    return std::to_string(local_ranks) + " ranks share " + std::to_string(devices) +
           " GPU(s) on rank " + std::to_string(rank) +
           "'s host, and NCCL refuses two ranks on one GPU (ringreduce does not)";
  }
  *device = local_rank % devices;
  return {};
}

std::unique_ptr<Library> make_nccl_library(Library* control, int device, bool blocking) {
  return std::make_unique<NcclLibrary>(control, device, blocking);
}

}  // namespace rrbench
