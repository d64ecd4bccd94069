// ringreduce through its public C API, as an application calls it.

#include <ringreduce/ringreduce.h>

#include <cstdlib>
#include <string>

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
    return "ringreduce " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100) + ", env:// rendezvous, UCX transport";
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
    return "rrAllReduce, blocking host call; " + setting("RR_CHUNK_BYTES") + ", " + setting("RR_PIPELINE_DEPTH");
  }
  std::string unsupported(const Collective& coll, DataType, RedOp) const override {
    if (coll.kind == CollKind::kAllReduce) return {};
    return std::string("ringreduce has no ") + coll.name + " in its C API yet";
  }
  void run(const CallArgs& args) override {
    check(rrAllReduce(args.send, args.recv, args.count, to_rr(args.type), to_rr(args.op), library_->comm(), nullptr),
          library_->comm(), "rrAllReduce");
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
