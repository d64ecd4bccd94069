// Gloo (Debian's libgloo-dev) as PyTorch drove it before its newer API: the
// ring algorithms gloo::AllreduceRing and gloo::AllreduceRingChunked over
// Gloo's TCP transport, the ranks meeting through a gloo FileStore.
//   gloo-ring         N-1 rounds, each passing the whole buffer to the right
//                     neighbour and reducing what came from the left;
//   gloo-ringchunked  the buffer cut into 2N chunks that circulate a
//                     reduce-scatter then an all-gather, two in flight.
// Both reduce in place: the out-of-place rows copy the input into the output
// first (what an application of these classes has to do), inside the timing.

#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend.h"

namespace rrbench {

namespace {

int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') throw BackendError(std::string("gloo: ") + name + " is not set");
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 0 || parsed > INT_MAX) {
    throw BackendError(std::string("gloo: ") + name + "='" + value + "' is not a rank number");
  }
  return static_cast<int>(parsed);
}

bool is_loopback(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "localhost" || address == "::1";
}

template <typename T>
const gloo::ReductionFunction<T>* reduction(RedOp op) {
  switch (op) {
    case RedOp::kSum: return gloo::ReductionFunction<T>::sum;
    case RedOp::kProd: return gloo::ReductionFunction<T>::product;
    case RedOp::kMax: return gloo::ReductionFunction<T>::max;
    case RedOp::kMin: return gloo::ReductionFunction<T>::min;
    default: return nullptr;
  }
}

template <template <typename> class Algorithm, typename T>
std::unique_ptr<gloo::Algorithm> make_typed(const std::shared_ptr<gloo::Context>& context, void* buffer,
                                            std::size_t count, RedOp op) {
  return std::make_unique<Algorithm<T>>(context, std::vector<T*>{static_cast<T*>(buffer)}, static_cast<int>(count),
                                        reduction<T>(op));
}

template <template <typename> class Algorithm>
std::unique_ptr<gloo::Algorithm> make_algorithm(const std::shared_ptr<gloo::Context>& context, void* buffer,
                                                std::size_t count, DataType type, RedOp op) {
  switch (type) {
    case DataType::kInt8: return make_typed<Algorithm, int8_t>(context, buffer, count, op);
    case DataType::kUint8: return make_typed<Algorithm, uint8_t>(context, buffer, count, op);
    case DataType::kInt32: return make_typed<Algorithm, int32_t>(context, buffer, count, op);
    case DataType::kUint32: return make_typed<Algorithm, uint32_t>(context, buffer, count, op);
    case DataType::kInt64: return make_typed<Algorithm, int64_t>(context, buffer, count, op);
    case DataType::kUint64: return make_typed<Algorithm, uint64_t>(context, buffer, count, op);
    case DataType::kFloat16: return make_typed<Algorithm, gloo::float16>(context, buffer, count, op);
    case DataType::kFloat32: return make_typed<Algorithm, float>(context, buffer, count, op);
    case DataType::kFloat64: return make_typed<Algorithm, double>(context, buffer, count, op);
    case DataType::kBfloat16: break;
  }
  throw BackendError(std::string("gloo has no ") + type_name(type) + " type");
}

// Removes the files of a FileStore directory, then the directory.
void remove_store(const std::string& dir) {
  if (DIR* listing = opendir(dir.c_str())) {
    while (const dirent* entry = readdir(listing)) {
      if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) {
        unlink((dir + "/" + entry->d_name).c_str());
      }
    }
    closedir(listing);
  }
  rmdir(dir.c_str());
}

class GlooLibrary : public Library {
 public:
  GlooLibrary(const std::string& store_dir, int timeout_s) {
    rank_ = env_int("RANK");
    nranks_ = env_int("WORLD_SIZE");
    const char* master_addr = std::getenv("MASTER_ADDR");
    const char* master_port = std::getenv("MASTER_PORT");
    if (store_dir.empty()) {
      if (master_addr == nullptr || master_port == nullptr) {
        throw BackendError("gloo: MASTER_ADDR and MASTER_PORT name the job's FileStore; set them or give --gloo-store");
      }
      // One directory per job: the launcher's pid tells apart two jobs that
      // reuse a port, and every rank of a local job shares that parent.
      const char* tmp = std::getenv("TMPDIR");
      store_dir_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/rr-bench-gloo." + master_addr + "." + master_port +
                   "." + std::to_string(getppid());
      owns_store_ = true;
    } else {
      store_dir_ = store_dir;
    }
    if (mkdir(store_dir_.c_str(), 0700) != 0 && errno != EEXIST) {
      throw BackendError("gloo: cannot create the FileStore directory " + store_dir_ + ": " + std::strerror(errno));
    }

    // Where this rank listens: GLOO_SOCKET_IFNAME as in PyTorch, else loopback
    // for a local job, else the address the host name resolves to.
    gloo::transport::tcp::attr attr;
    if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME")) {
      attr.iface = iface;
      where_ = std::string("interface ") + iface;
    } else if (master_addr != nullptr && is_loopback(master_addr)) {
      attr.hostname = "127.0.0.1";
      where_ = "127.0.0.1";
    } else {
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      attr.hostname = host;
      where_ = host;
    }
    try {
      device_ = gloo::transport::tcp::CreateDevice(attr);
      gloo::rendezvous::FileStore store(store_dir_);
      context_ = std::make_shared<gloo::rendezvous::Context>(rank_, nranks_);
      if (timeout_s > 0) context_->setTimeout(std::chrono::seconds(timeout_s));
      context_->connectFullMesh(store, device_);
    } catch (const gloo::Exception& e) {
      throw BackendError(std::string("gloo: connecting the full mesh through ") + store_dir_ + " failed: " + e.what());
    }
  }
  ~GlooLibrary() override {
    if (owns_store_) {
      // Every rank has read every address once all have passed this barrier.
      try {
        barrier();
      } catch (const BackendError&) {
        return;  // a peer is gone: leave the directory for inspection
      }
      if (rank_ == 0) remove_store(store_dir_);
    }
  }

  std::string name() const override { return "gloo"; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  std::string description() const override {
    return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
           std::to_string(GLOO_VERSION_PATCH) + " (Debian libgloo-dev), TCP transport on " + where_ +
           ", FileStore " + store_dir_ + ", timeout " + std::to_string(context_->getTimeout().count()) + " ms";
  }
  std::unique_ptr<Backend> make_backend(const std::string& variant) override;

  void barrier() override {
    try {
      gloo::BarrierAllToAll(context_).run();
    } catch (const gloo::Exception& e) {
      throw BackendError(std::string("gloo barrier failed: ") + e.what());
    }
  }
  void allreduce_max(double* values, std::size_t n) override { control_allreduce(values, n, RedOp::kMax); }
  void allreduce_sum(double* values, std::size_t n) override { control_allreduce(values, n, RedOp::kSum); }

  std::shared_ptr<gloo::Context> context() const { return context_; }

 private:
  void control_allreduce(double* values, std::size_t n, RedOp op) {
    try {
      gloo::AllreduceRing<double>(context_, {values}, static_cast<int>(n), reduction<double>(op)).run();
    } catch (const gloo::Exception& e) {
      throw BackendError(std::string("gloo allreduce of timings failed: ") + e.what());
    }
  }

  int rank_ = 0;
  int nranks_ = 0;
  std::string store_dir_;
  bool owns_store_ = false;
  std::string where_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
};

class GlooBackend : public Backend {
 public:
  GlooBackend(GlooLibrary* library, bool chunked) : library_(library), chunked_(chunked) {}

  std::string name() const override { return chunked_ ? "gloo-ringchunked" : "gloo-ring"; }
  std::string settings() const override {
    return chunked_ ? "gloo::AllreduceRingChunked (2N chunks of at least 256 elements, 2 in flight), in place; "
                      "out of place = memcpy + in place"
                    : "gloo::AllreduceRing (whole buffer each of N-1 rounds), in place; out of place = memcpy + in place";
  }
  std::string unsupported(const Collective& coll, DataType type, RedOp op) const override {
    if (coll.kind != CollKind::kAllReduce) {
      return std::string("rr-bench drives Gloo's ring allreduce only, not ") + coll.name;
    }
    if (type == DataType::kBfloat16) return "gloo has no bfloat16 type";
    if (op == RedOp::kAvg) return "gloo has no avg reduction";
    if (is_bitwise(op)) return "gloo has no bitwise reductions";
    return {};
  }
  void prepare(const CallArgs& args) override {
    if (args.count > static_cast<std::size_t>(INT_MAX)) {
      throw BackendError("gloo's ring algorithms take an int count; " + std::to_string(args.count) + " is too many");
    }
    // Out-of-place and in-place rows reduce in the same output buffer, so one
    // algorithm object (and one pairing of buffers with the peers) serves both.
    if (algorithm_ && buffer_ == args.recv && count_ == args.count && type_ == args.type && op_ == args.op) return;
    algorithm_.reset();
    try {
      algorithm_ = chunked_ ? make_algorithm<gloo::AllreduceRingChunked>(library_->context(), args.recv, args.count,
                                                                         args.type, args.op)
                            : make_algorithm<gloo::AllreduceRing>(library_->context(), args.recv, args.count,
                                                                  args.type, args.op);
    } catch (const gloo::Exception& e) {
      throw BackendError(name() + ": setting up the algorithm failed: " + e.what());
    }
    buffer_ = args.recv;
    count_ = args.count;
    type_ = args.type;
    op_ = args.op;
  }
  void run(const CallArgs& args) override {
    if (!args.in_place) std::memcpy(args.recv, args.send, args.count * type_size(args.type));
    try {
      algorithm_->run();
    } catch (const gloo::Exception& e) {
      throw BackendError(name() + " failed: " + e.what());
    }
  }
  void finish_row() override { algorithm_.reset(); }

 private:
  GlooLibrary* library_;
  bool chunked_;
  std::unique_ptr<gloo::Algorithm> algorithm_;
  void* buffer_ = nullptr;
  std::size_t count_ = 0;
  DataType type_ = DataType::kFloat32;
  RedOp op_ = RedOp::kSum;
};

std::unique_ptr<Backend> GlooLibrary::make_backend(const std::string& variant) {
  if (variant == "gloo-ring") return std::make_unique<GlooBackend>(this, false);
  if (variant == "gloo-ringchunked") return std::make_unique<GlooBackend>(this, true);
  throw BackendError("gloo has no backend variant '" + variant + "'");
}

}  // namespace

std::unique_ptr<Library> make_gloo_library(const std::string& store_dir, int timeout_s) {
  return std::make_unique<GlooLibrary>(store_dir, timeout_s);
}

}  // namespace rrbench
