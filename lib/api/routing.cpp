// The argument checks the C entry points share, and how a call is routed:
// blocking on the calling thread, queued (the Async forms), or ordered on a
// stream through the staging pipeline (device buffers).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "api/internal.hpp"
#include "memory/memory_kind.hpp"
#include "reduce/reduce.hpp"

namespace rr::api {

static_assert(sizeof(rrDataType_t) == sizeof(int) && sizeof(rrRedOp_t) == sizeof(int), "enums are ints in the C ABI");

rr::Status check_call(const char* call, rrComm_t comm, rrDataType_t datatype, const rrRedOp_t* op, void* stream) {
  if (!comm) return rr::InvalidArgument(std::string(call) + ": comm is NULL");
  // A C caller may pass any int as an enum; in C++ loading an out-of-range
  // enum value is undefined, so look at its bytes instead.
  int raw_dtype = 0;
  std::memcpy(&raw_dtype, &datatype, sizeof(raw_dtype));
  if (!rr::reduce::valid_dtype(raw_dtype)) {
    return rr::InvalidArgument(std::string(call) + ": datatype=" + std::to_string(raw_dtype) + " is not an rrDataType_t");
  }
  if (op) {
    int raw_op = 0;
    std::memcpy(&raw_op, op, sizeof(raw_op));
    if (!rr::reduce::valid_op(raw_op)) {
      return rr::InvalidArgument(std::string(call) + ": op=" + std::to_string(raw_op) + " is not an rrRedOp_t");
    }
    if (!rr::reduce::op_defined(datatype, *op)) {
      return rr::InvalidArgument(std::string(call) + ": op " + rr::reduce::op_name(*op) +
                                 " is not defined for datatype " + rr::reduce::dtype_name(datatype) +
                                 " (bitwise ops take integer types)");
    }
  }
#if !RR_HAVE_CUDA
  if (stream) {
    return rr::InvalidUsage(std::string(call) +
                            ": stream is not NULL, but stream-ordered calls need the CUDA build of ringreduce");
  }
#else
  (void)stream;
#endif
  return rr::Status::Ok();
}

namespace {

// User space ends below 2^56 on every 64-bit Linux (x86-64 with 5-level
// paging; 2^47 without it, 2^48 or 2^52 on AArch64): a buffer that would end
// past it cannot exist, whatever the machine's memory.
constexpr uint64_t kAddressSpaceEnd = uint64_t{1} << 56;

std::string in_units(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && bytes % 1024 == 0 && unit < 6) bytes /= 1024, ++unit;
  return std::to_string(bytes) + " " + kUnits[unit];
}

}  // namespace

rr::Status check_extent(const char* call, const char* name, const void* buf, size_t count, size_t elem) {
  // Text only on failure: a good call allocates nothing.
  auto what = [&] {
    return std::string(call) + ": count=" + std::to_string(count) + " x " + std::to_string(elem) + " bytes";
  };
  if (count > SIZE_MAX / elem) {
    return rr::InvalidArgument(what() + " overflows size_t (2^64 bytes): no " + name + " can hold it");
  }
  const uint64_t bytes = static_cast<uint64_t>(count) * elem;
  const auto start = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(buf));
  if (bytes > kAddressSpaceEnd || start > kAddressSpaceEnd - bytes) {
    return rr::InvalidArgument(what() + " (" + in_units(bytes) + ") at " + name + " cannot exist: it would end past " +
                               in_units(kAddressSpaceEnd) + ", beyond any process's address space");
  }
  return rr::Status::Ok();
}

rr::Status check_buffers(const char* call, const void* sendbuff, const void* recvbuff, size_t count,
                         rrDataType_t datatype) {
  const size_t elem = rr::reduce::dtype_size(datatype);
  if (count == 0) return rr::Status::Ok();
  if (!sendbuff) return rr::InvalidArgument(std::string(call) + ": sendbuff is NULL with count=" + std::to_string(count));
  if (!recvbuff) return rr::InvalidArgument(std::string(call) + ": recvbuff is NULL with count=" + std::to_string(count));
  RR_RETURN_IF_ERROR(check_extent(call, "sendbuff", sendbuff, count, elem));
  RR_RETURN_IF_ERROR(check_extent(call, "recvbuff", recvbuff, count, elem));
  const auto s = reinterpret_cast<uintptr_t>(sendbuff);
  const auto r = reinterpret_cast<uintptr_t>(recvbuff);
  const size_t bytes = count * elem;
  if (s != r && s < r + bytes && r < s + bytes) {
    return rr::InvalidArgument(std::string(call) +
                               ": sendbuff and recvbuff overlap without being equal (in place means sendbuff == recvbuff)");
  }
  return rr::Status::Ok();
}

rr::Status route(const char* call, void* stream, std::initializer_list<Buffer> buffers, Route* out) {
  Route r;
  const Buffer* host = nullptr;
  const Buffer* device = nullptr;
  for (const Buffer& b : buffers) {
    if (!b.ptr) continue;
    rr::memory::Placement placement;
    rr::Status s = rr::memory::classify(b.ptr, b.name, &placement);
    if (!s.ok()) return rr::Status(s.code(), std::string(call) + ": " + s.message());
    if (!placement.on_device()) {
      host = &b;
      continue;
    }
    if (device && placement.device != r.device) {
      return rr::InvalidArgument(std::string(call) + ": " + device->name + " is on device " + std::to_string(r.device) +
                                 " but " + b.name + " is on device " + std::to_string(placement.device));
    }
    device = &b;
    r.device = placement.device;
  }
  if (device && host) {
    return rr::InvalidArgument(std::string(call) + ": " + device->name + " is device memory but " + host->name +
                               " is host memory; pass both on the device or both on the host");
  }
  r.staged = device != nullptr;
  r.device_buffer = device ? device->name : nullptr;
  r.stream_ordered = r.staged || stream != nullptr;
  *out = r;
  return rr::Status::Ok();
}

// Point-to-point takes host buffers and no stream.
rr::Status host_only(const char* call, const char* name, const void* buf, void* stream) {
  if (stream) {
    return rr::InvalidArgument(std::string(call) + ": stream is not NULL; point-to-point calls are not stream-ordered "
                               "(pass NULL, with host buffers)");
  }
  rr::memory::Placement placement;
  rr::Status s = rr::memory::classify(buf, name, &placement);
  if (!s.ok()) return rr::Status(s.code(), std::string(call) + ": " + s.message());
  if (placement.on_device()) {
    return rr::InvalidArgument(std::string(call) + ": " + name + " is " + rr::memory::kind_name(placement.kind) +
                               "; point-to-point calls take host buffers");
  }
  return rr::Status::Ok();
}

rr::Status check_blocks(const char* call, const char* big_name, const void* big, int nranks,
                        const char* small_name, const void* small, size_t small_count, int rank, size_t elem) {
  if (small_count == 0) return rr::Status::Ok();
  if (!big) return rr::InvalidArgument(std::string(call) + ": " + big_name + " is NULL with count " + std::to_string(small_count));
  if (!small) return rr::InvalidArgument(std::string(call) + ": " + small_name + " is NULL with count " + std::to_string(small_count));
  RR_RETURN_IF_ERROR(check_extent(call, small_name, small, small_count, elem));
  if (small_count > SIZE_MAX / elem / static_cast<size_t>(nranks)) {
    return rr::InvalidArgument(std::string(call) + ": count=" + std::to_string(small_count) + " x " +
                               std::to_string(elem) + " bytes x " + std::to_string(nranks) + " ranks overflows size_t "
                               "(2^64 bytes): no " + big_name + " can hold it");
  }
  RR_RETURN_IF_ERROR(check_extent(call, big_name, big, small_count * static_cast<size_t>(nranks), elem));
  const auto b = reinterpret_cast<uintptr_t>(big);
  const auto s = reinterpret_cast<uintptr_t>(small);
  const size_t big_bytes = small_count * static_cast<size_t>(nranks) * elem;
  const size_t small_bytes = small_count * elem;
  const uintptr_t in_place = b + static_cast<size_t>(rank) * small_bytes;
  if (s != in_place && s < b + big_bytes && b < s + small_bytes) {
    return rr::InvalidArgument(std::string(call) + ": " + small_name + " overlaps " + big_name +
                               " other than in place (in place means " + small_name + " == " + big_name +
                               " + rank * count elements)");
  }
  return rr::Status::Ok();
}

rr::Status need(const char* call, const char* name, const void* buf, size_t count, size_t elem) {
  if (count > 0 && !buf) return rr::InvalidArgument(std::string(call) + ": " + name + " is NULL with count " + std::to_string(count));
  if (count == 0) return rr::Status::Ok();
  return check_extent(call, name, buf, count, elem);
}

rr::Status check_root(const char* call, rrComm_t comm, int root) {
  if (root < 0 || root >= comm->impl->size()) {
    return rr::InvalidArgument(std::string(call) + ": root=" + std::to_string(root) + " out of range for " +
                               std::to_string(comm->impl->size()) + " ranks");
  }
  return rr::Status::Ok();
}

rr::Status check_coll_config(const char* call, const rrCollConfig_t* config, bool takes_algorithm,
                             rr::CallSettings* out) {
  *out = rr::CallSettings();
  if (!config) return rr::Status::Ok();
  // The fields this version reads must lie within what the caller's struct holds.
  constexpr size_t kReads = offsetof(rrCollConfig_t, algorithm) + sizeof(config->algorithm);
  if (config->magic != RR_COLL_CONFIG_MAGIC || config->size < kReads) {
    return rr::InvalidArgument(std::string(call) + ": config was not made from RR_COLL_CONFIG_INITIALIZER (size " +
                               std::to_string(config->size) + ", magic " + std::to_string(config->magic) + ")");
  }
  if (config->timeout_ms != RR_CONFIG_UNDEF_INT) {
    if (config->timeout_ms < 1) {
      return rr::InvalidArgument(std::string(call) + ": config->timeout_ms=" + std::to_string(config->timeout_ms) +
                                 ": must be >= 1 (or RR_CONFIG_UNDEF_INT: the communicator's)");
    }
    out->timeout_ms = config->timeout_ms;
  }
  if (config->algorithm) {
    const std::string text(config->algorithm, strnlen(config->algorithm, 32));
    rr::algo::AllreduceAlgo algo = rr::algo::AllreduceAlgo::kAuto;
    if (!rr::algo::parse_algo(text, &algo)) {
      return rr::InvalidArgument(std::string(call) + ": config->algorithm=\"" + text +
                                 "\" is not one of auto, ring, rd, hd, oneshot (or NULL: the communicator's)");
    }
    if (algo != rr::algo::AllreduceAlgo::kAuto && !takes_algorithm) {
      return rr::InvalidArgument(std::string(call) + ": config->algorithm=\"" + text +
                                 "\": only rrAllReduce's forms take an algorithm (NULL here)");
    }
    out->allreduce_algo = algo;
    out->forces_algorithm = takes_algorithm;
  }
  return rr::Status::Ok();
}

}  // namespace rr::api
