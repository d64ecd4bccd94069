// ringreduce through its public C API, as an application calls it.

#include <ringreduce/ringreduce.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend.h"

namespace rrbench {

namespace {

rrDataType_t to_rr(DataType type) {
  switch (type) {
    case DataType::kInt8: return rrInt8;
    case DataType::kUint8: return rrUint8;
    case DataType::kInt32: return rrInt32;
    case DataType::kUint32: return rrUint32;
    case DataType::kInt64: return rrInt64;
    case DataType::kUint64: return rrUint64;
    case DataType::kFloat16: return rrFloat16;
    case DataType::kFloat32: return rrFloat32;
    case DataType::kFloat64: return rrFloat64;
    case DataType::kBfloat16: return rrBfloat16;
  }
  return rrNumTypes;
}

rrRedOp_t to_rr(RedOp op) {
  switch (op) {
    case RedOp::kSum: return rrSum;
    case RedOp::kProd: return rrProd;
    case RedOp::kMax: return rrMax;
    case RedOp::kMin: return rrMin;
    case RedOp::kAvg: return rrAvg;
    case RedOp::kBand: return rrBand;
    case RedOp::kBor: return rrBor;
    case RedOp::kBxor: return rrBxor;
  }
  return rrNumOps;
}

void check(rrResult_t result, rrComm_t comm, const std::string& what) {
  if (result != rrSuccess) {
    throw BackendError(what + " failed: " + rrGetErrorString(result) + ": " + rrGetLastError(comm));
  }
}

// "RR_CHUNK_BYTES=1M" when set in the environment, else "RR_CHUNK_BYTES default".
std::string setting(const char* variable) {
  const char* value = std::getenv(variable);
  return value ? std::string(variable) + "=" + value : std::string(variable) + " default";
}

class RingreduceLibrary : public Library {
 public:
  explicit RingreduceLibrary(int timeout_s) {
    rrConfig_t config = RR_CONFIG_INITIALIZER;
    // -T bounds every wait inside the engine too, so a lost peer is named by
    // the engine instead of only by rr-bench's watchdog.
    if (timeout_s > 0) config.timeout_ms = timeout_s * 1000;
    check(rrCommInitUrl(&comm_, "env://", -1, -1, &config), nullptr, "rrCommInitUrl(env://)");
    check(rrCommUserRank(comm_, &rank_), comm_, "rrCommUserRank");
    check(rrCommCount(comm_, &nranks_), comm_, "rrCommCount");
  }
  ~RingreduceLibrary() override {
    if (comm_ != nullptr) rrCommDestroy(comm_);
  }

  std::string name() const override { return "ringreduce"; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  std::string description() const override {
    int version = 0;
    rrGetVersion(&version);
    // The ring's order (RR_RING_ORDER): each host's ranks together, or rank order.
    std::vector<int> order(static_cast<size_t>(nranks_));
    std::string ring;
    if (rrCommGetRingOrder(comm_, order.data()) == rrSuccess) {
      for (size_t p = 0; p < order.size() && p < 64; ++p) ring += (p ? " " : "") + std::to_string(order[p]);
      if (order.size() > 64) ring += " ...";
    }
    return "ringreduce " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100) + ", env:// rendezvous, UCX transport, ring order " + ring + " (" +
           setting("RR_RING_ORDER") + ")";
  }
  std::unique_ptr<Backend> make_backend(const std::string& variant) override;

  void barrier() override {
    float token = 0;
    check(rrAllReduce(&token, &token, 1, rrFloat32, rrSum, comm_, nullptr), comm_, "rrAllReduce (barrier)");
  }
  void allreduce_max(double* values, std::size_t n) override {
    check(rrAllReduce(values, values, n, rrFloat64, rrMax, comm_, nullptr), comm_, "rrAllReduce (max of timings)");
  }
  void allreduce_sum(double* values, std::size_t n) override {
    check(rrAllReduce(values, values, n, rrFloat64, rrSum, comm_, nullptr), comm_, "rrAllReduce (sum of counts)");
  }

  rrComm_t comm() const { return comm_; }

 private:
  rrComm_t comm_ = nullptr;
  int rank_ = 0;
  int nranks_ = 0;
};

class RingreduceBackend : public Backend {
 public:
  explicit RingreduceBackend(RingreduceLibrary* library) : library_(library) {}

  std::string name() const override { return "ringreduce"; }
  std::string settings() const override {
    return "rrAllReduce and friends, blocking host calls; " + setting("RR_CHUNK_BYTES") + ", " +
           setting("RR_PIPELINE_DEPTH");
  }
  std::string algorithm(const Collective& coll, std::size_t count, DataType type) const override {
    const std::size_t n = static_cast<std::size_t>(library_->nranks());
    const char* name = nullptr;
    std::size_t per_call = count;  // as run() passes it
    switch (coll.kind) {
      case CollKind::kAllReduce: name = "allreduce"; break;
      case CollKind::kReduceScatter: name = "reducescatter", per_call = count / n; break;
      case CollKind::kAllGather: name = "allgather", per_call = count / n; break;
      case CollKind::kBroadcast: name = "broadcast"; break;
      case CollKind::kReduce: name = "reduce"; break;
      case CollKind::kAllToAll: name = "alltoall", per_call = count / n; break;
      case CollKind::kSendRecv: return "point-to-point";
    }
    const char* chosen = nullptr;
    if (rrCommGetAlgorithm(library_->comm(), name, per_call, to_rr(type), &chosen) != rrSuccess) return {};
    return chosen;
  }
  std::string unsupported(const Collective& coll, DataType type, RedOp op) const override {
    // The engine refuses them (rrInvalidArgument), as MPI does.
    if (coll.has_op && is_bitwise(op) && is_float(type)) {
      return std::string("ringreduce has no ") + op_name(op) + " on floating types (bitwise ops take integers)";
    }
    return {};
  }
  void run(const CallArgs& a) override {
    rrComm_t comm = library_->comm();
    const rrDataType_t type = to_rr(a.type);
    switch (a.coll->kind) {
      case CollKind::kAllReduce:
        check(rrAllReduce(a.send, a.recv, a.count, type, to_rr(a.op), comm, nullptr), comm, "rrAllReduce");
        return;
      case CollKind::kReduceScatter:
        check(rrReduceScatter(a.send, a.recv, a.recv_count, type, to_rr(a.op), comm, nullptr), comm,
              "rrReduceScatter");
        return;
      case CollKind::kAllGather:
        check(rrAllGather(a.send, a.recv, a.send_count, type, comm, nullptr), comm, "rrAllGather");
        return;
      case CollKind::kBroadcast:
        check(rrBroadcast(a.send, a.recv, a.count, type, a.root, comm, nullptr), comm, "rrBroadcast");
        return;
      case CollKind::kReduce:
        check(rrReduce(a.send, a.recv, a.count, type, to_rr(a.op), a.root, comm, nullptr), comm, "rrReduce");
        return;
      case CollKind::kAllToAll:
        check(rrAllToAll(a.send, a.recv, a.count / static_cast<std::size_t>(a.nranks), type, comm, nullptr), comm,
              "rrAllToAll");
        return;
      case CollKind::kSendRecv: {
        // Both at once in a group, as nccl-tests' sendrecv: a blocking send
        // first would wait for the neighbour's matching receive forever.
        const int right = (a.rank + 1) % a.nranks;
        const int left = (a.rank + a.nranks - 1) % a.nranks;
        check(rrGroupStart(), comm, "rrGroupStart");
        check(rrSend(a.send, a.count, type, right, comm, nullptr), comm, "rrSend to the right neighbour");
        check(rrRecv(a.recv, a.count, type, left, comm, nullptr), comm, "rrRecv from the left neighbour");
        check(rrGroupEnd(), comm, "rrGroupEnd (sendrecv)");
        return;
      }
    }
    throw BackendError(std::string("ringreduce backend: no call for ") + a.coll->name);
  }

 private:
  RingreduceLibrary* library_;
};

std::unique_ptr<Backend> RingreduceLibrary::make_backend(const std::string& variant) {
  if (variant != "ringreduce") throw BackendError("ringreduce has no backend variant '" + variant + "'");
  return std::make_unique<RingreduceBackend>(this);
}

}  // namespace

std::unique_ptr<Library> make_ringreduce_library(int timeout_s) {
  return std::make_unique<RingreduceLibrary>(timeout_s);
}

}  // namespace rrbench
