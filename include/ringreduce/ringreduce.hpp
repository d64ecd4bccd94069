// C++ RAII wrapper over the C API (ringreduce.h). Header-only: it adds no
// symbols, so the stable ABI stays the C one. Failures throw rr::Error, which
// carries the result code and the library's message.
#pragma once

#include <ringreduce/ringreduce.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace rr {

class Error : public std::runtime_error {
 public:
  Error(rrResult_t result, const std::string& message)
      : std::runtime_error(message), result_(result) {}
  rrResult_t result() const { return result_; }

 private:
  rrResult_t result_;
};

inline void check(rrResult_t result, rrComm_t comm = nullptr) {
  if (result != rrSuccess) {
    throw Error(result, std::string(rrGetErrorString(result)) + ": " + rrGetLastError(comm));
  }
}

// The rrDataType_t of a C++ element type.
template <typename T>
constexpr rrDataType_t datatype_of() {
  if constexpr (std::is_same_v<T, int8_t>) return rrInt8;
  else if constexpr (std::is_same_v<T, uint8_t>) return rrUint8;
  else if constexpr (std::is_same_v<T, int32_t>) return rrInt32;
  else if constexpr (std::is_same_v<T, uint32_t>) return rrUint32;
  else if constexpr (std::is_same_v<T, int64_t>) return rrInt64;
  else if constexpr (std::is_same_v<T, uint64_t>) return rrUint64;
  else if constexpr (std::is_same_v<T, float>) return rrFloat32;
  else if constexpr (std::is_same_v<T, double>) return rrFloat64;
  else static_assert(sizeof(T) == 0, "no rrDataType_t for this type; pass one explicitly");
}

class UniqueId {
 public:
  static UniqueId create() {
    UniqueId id;
    check(rrGetUniqueId(&id.id_));
    return id;
  }
  const rrUniqueId& get() const { return id_; }
  rrUniqueId& get() { return id_; }

 private:
  rrUniqueId id_{};
};

class Comm {
 public:
  // env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE).
  static Comm from_env() {
    rrComm_t c = nullptr;
    check(rrCommInitFromEnv(&c));
    return Comm(c);
  }
  static Comm from_url(const std::string& url, int nranks = -1, int rank = -1,
                       const rrConfig_t* config = nullptr) {
    rrComm_t c = nullptr;
    check(rrCommInitUrl(&c, url.c_str(), nranks, rank, config));
    return Comm(c);
  }
  static Comm from_unique_id(const UniqueId& id, int nranks, int rank,
                             const rrConfig_t* config = nullptr) {
    rrComm_t c = nullptr;
    check(rrCommInitRankConfig(&c, nranks, id.get(), rank, config));
    return Comm(c);
  }

  Comm() = default;
  explicit Comm(rrComm_t comm) : comm_(comm) {}
  Comm(Comm&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  Comm& operator=(Comm&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm() { reset(); }

  void reset() {
    if (comm_) rrCommDestroy(comm_);
    comm_ = nullptr;
  }
  rrComm_t get() const { return comm_; }

  int size() const {
    int n = 0;
    check(rrCommCount(comm_, &n), comm_);
    return n;
  }
  int rank() const {
    int r = 0;
    check(rrCommUserRank(comm_, &r), comm_);
    return r;
  }
  // The timeout of the operations called from now on (rrCommSetTimeout).
  void set_timeout(std::chrono::milliseconds timeout) const {
    check(rrCommSetTimeout(comm_, static_cast<int>(timeout.count())), comm_);
  }
  std::chrono::milliseconds timeout() const {
    int ms = 0;
    check(rrCommGetTimeout(comm_, &ms), comm_);
    return std::chrono::milliseconds(ms);
  }

  // `config`: the call's own settings (rrCollConfig_t: its timeout, its
  // schedule), or none: the communicator's.
  void all_reduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op,
                  const rrCollConfig_t* config = nullptr) {
    check(rrAllReduceConfig(send, recv, count, dtype, op, comm_, nullptr, config), comm_);
  }
  template <typename T>
  void all_reduce(const T* send, T* recv, size_t count, rrRedOp_t op = rrSum, const rrCollConfig_t* config = nullptr) {
    all_reduce(send, recv, count, datatype_of<T>(), op, config);
  }
  // In place over a vector.
  template <typename T>
  void all_reduce(std::vector<T>& data, rrRedOp_t op = rrSum, const rrCollConfig_t* config = nullptr) {
    all_reduce(data.data(), data.data(), data.size(), op, config);
  }

  // In place from `root`.
  template <typename T>
  void broadcast(std::vector<T>& data, int root) {
    check(rrBroadcast(data.data(), data.data(), data.size(), datatype_of<T>(), root, comm_, nullptr), comm_);
  }
  // The root's result lands in `result` (sized like `data` there; untouched elsewhere).
  template <typename T>
  void reduce(const std::vector<T>& data, std::vector<T>& result, int root, rrRedOp_t op = rrSum) {
    check(rrReduce(data.data(), result.data(), data.size(), datatype_of<T>(), op, root, comm_, nullptr), comm_);
  }
  // Every rank's `mine`, concatenated in rank order.
  template <typename T>
  std::vector<T> all_gather(const std::vector<T>& mine) {
    std::vector<T> all(mine.size() * static_cast<size_t>(size()));
    check(rrAllGather(mine.data(), all.data(), mine.size(), datatype_of<T>(), comm_, nullptr), comm_);
    return all;
  }
  // Block `rank` of the reduction of every rank's `blocks` (size() equal blocks).
  template <typename T>
  std::vector<T> reduce_scatter(const std::vector<T>& blocks, rrRedOp_t op = rrSum) {
    std::vector<T> mine(blocks.size() / static_cast<size_t>(size()));
    check(rrReduceScatter(blocks.data(), mine.data(), mine.size(), datatype_of<T>(), op, comm_, nullptr), comm_);
    return mine;
  }
  template <typename T>
  void send(const std::vector<T>& data, int peer) {
    check(rrSend(data.data(), data.size(), datatype_of<T>(), peer, comm_, nullptr), comm_);
  }
  template <typename T>
  void recv(std::vector<T>& data, int peer) {
    check(rrRecv(data.data(), data.size(), datatype_of<T>(), peer, comm_, nullptr), comm_);
  }
  void barrier(const rrCollConfig_t* config = nullptr) { check(rrBarrierConfig(comm_, nullptr, config), comm_); }

  // MPI_Comm_split; an empty Comm for a negative color.
  Comm split(int color, int key, const rrConfig_t* config = nullptr) const {
    rrComm_t c = nullptr;
    check(rrCommSplit(comm_, color, key, &c, config), comm_);
    return Comm(c);
  }
  // ULFM's MPI_Comm_revoke: every pending and later call on it, here and on
  // every peer, throws Error with rrRevoked.
  void revoke() const { check(rrCommRevoke(comm_), comm_); }
  // ULFM's MPI_Comm_shrink: the ranks not in `exclude` (all passing it alike;
  // the excluded ones do not call) make a new Comm, ranked in the old order.
  Comm shrink(const std::vector<int>& exclude, const rrConfig_t* config = nullptr) const {
    rrComm_t c = nullptr;
    check(rrCommShrink(comm_, exclude.data(), static_cast<int>(exclude.size()), &c, config), comm_);
    return Comm(c);
  }
  // ULFM's MPI_Comm_shrink with no list: the ranks still alive agree which
  // failed and make a new Comm without them; *excluded (if given) gets the
  // agreed old ranks, ascending.
  Comm shrink_failed(std::vector<int>* excluded = nullptr, const rrConfig_t* config = nullptr) const {
    int size = 0;
    check(rrCommCount(comm_, &size), comm_);
    std::vector<int> ranks(static_cast<size_t>(size));
    int n = 0;
    rrComm_t c = nullptr;
    check(rrCommShrinkFailed(comm_, &c, ranks.data(), &n, config), comm_);
    if (excluded) excluded->assign(ranks.begin(), ranks.begin() + n);
    return Comm(c);
  }
  // rrCommGetUniqueId (collective): the id new ranks join with (rrCommInitRank).
  rrUniqueId unique_id() const {
    rrUniqueId id{};
    check(rrCommGetUniqueId(comm_, &id), comm_);
    return id;
  }
  // rrCommGrow: these ranks at their numbers, the new ones (rrCommInitRank
  // on `id` with ranks from size() up) after them.
  Comm grow(int nranks, const rrUniqueId& id, const rrConfig_t* config = nullptr) const {
    rrComm_t c = nullptr;
    check(rrCommGrow(comm_, nranks, id, &c, config), comm_);
    return Comm(c);
  }
  explicit operator bool() const { return comm_ != nullptr; }

 private:
  rrComm_t comm_ = nullptr;
};

}  // namespace rr
