#include "exec/wire.hpp"

#include <cstring>

#include "reduce/reduce.hpp"

namespace rr::wire {

namespace {

constexpr uint32_t kHeaderMagic = 0x504f5252;  // "RROP" read little-endian
constexpr uint32_t kNoticeMagic = 0x544e5252;  // "RRNT"
constexpr uint8_t kVersion = 1;        // notices
constexpr uint8_t kHeaderVersion = 2;  // operation headers: 2 added the ring's shape

template <typename T>
void put(uint8_t* out, size_t offset, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out[offset + i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
}

template <typename T>
T get(const uint8_t* in, size_t offset) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(in[offset + i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

std::string OpHeader::describe() const {
  std::string text = name();
  if (collective == Collective::kBarrier) return text;
  text += collective == Collective::kAllToAllv ? " (" : " (count=" + std::to_string(count) + ", ";
  text += "dtype=" + std::string(reduce::valid_dtype(dtype) ? reduce::dtype_name(static_cast<rrDataType_t>(dtype))
                                                              : "invalid");
  const bool reduces = collective == Collective::kAllReduce || collective == Collective::kReduceScatter ||
                       collective == Collective::kReduce;
  if (reduces) {
    text += ", op=" + std::string(reduce::valid_op(op) ? reduce::op_name(static_cast<rrRedOp_t>(op)) : "invalid");
  }
  if (root >= 0) text += ", root=" + std::to_string(root);
  if (shape.chunk_elems > 0) text += ", chunks of " + std::to_string(shape.chunk_elems) + " elements";
  if (shape.depth > 0) text += ", depth " + std::to_string(shape.depth);
  return text + ")";
}

OpHeader header_of(const exec::Call& call, const RingShape& shape) {
  OpHeader h;
  h.collective = call.collective;
  h.dtype = static_cast<uint8_t>(call.dtype);
  h.op = static_cast<uint8_t>(call.op);
  h.sequence = call.sequence;
  h.count = call.count;
  h.root = call.root;
  h.shape = shape;
  return h;
}

Status disagreement(const OpHeader& mine, const OpHeader& theirs, int rank, int peer) {
  return InvalidUsage(mine.name() + ": ranks called different collectives or passed different arguments: rank " +
                      std::to_string(rank) + " called " + mine.describe() + ", rank " + std::to_string(peer) +
                      " called " + theirs.describe());
}

void encode_header(const OpHeader& h, uint8_t out[kOpHeaderBytes]) {
  put<uint32_t>(out, 0, kHeaderMagic);
  out[4] = kHeaderVersion;
  out[5] = static_cast<uint8_t>(h.collective);
  out[6] = h.dtype;
  out[7] = h.op;
  put<uint64_t>(out, 8, h.sequence);
  put<uint64_t>(out, 16, h.count);
  put<uint16_t>(out, 24, static_cast<uint16_t>(h.root));
  out[26] = h.shape.depth;
  out[27] = 0;
  put<uint32_t>(out, 28, h.shape.chunk_elems);
}

Status decode_header(const uint8_t* bytes, size_t size, OpHeader* out) {
  if (size != kOpHeaderBytes) {
    return RemoteError("operation header of " + std::to_string(size) + " bytes, expected " +
                       std::to_string(kOpHeaderBytes));
  }
  if (get<uint32_t>(bytes, 0) != kHeaderMagic) return RemoteError("operation header with a bad magic number");
  if (bytes[4] != kHeaderVersion) {
    return RemoteError("operation header of version " + std::to_string(bytes[4]) + ", this build speaks " +
                       std::to_string(kHeaderVersion));
  }
  if (bytes[5] == 0 || bytes[5] > static_cast<uint8_t>(Collective::kLast)) {
    return RemoteError("operation header names collective " + std::to_string(bytes[5]) + ", which does not exist");
  }
  if (bytes[27] != 0) return RemoteError("operation header with a nonzero reserved byte");
  OpHeader h;
  h.collective = static_cast<Collective>(bytes[5]);
  h.dtype = bytes[6];
  h.op = bytes[7];
  h.sequence = get<uint64_t>(bytes, 8);
  h.count = get<uint64_t>(bytes, 16);
  h.root = static_cast<int16_t>(get<uint16_t>(bytes, 24));
  h.shape.depth = bytes[26];
  h.shape.chunk_elems = get<uint32_t>(bytes, 28);
  *out = h;
  return Status::Ok();
}

size_t encode_notice(const Notice& n, uint8_t out[kMaxNoticeBytes]) {
  const size_t text = n.text.size() < kMaxNoticeText ? n.text.size() : kMaxNoticeText;
  put<uint32_t>(out, 0, kNoticeMagic);
  out[4] = kVersion;
  out[5] = static_cast<uint8_t>(n.kind);
  put<uint16_t>(out, 6, static_cast<uint16_t>(text));
  put<uint32_t>(out, 8, n.sequence);
  put<uint32_t>(out, 12, static_cast<uint32_t>(n.origin));
  std::memcpy(out + kNoticeHeaderBytes, n.text.data(), text);
  return kNoticeHeaderBytes + text;
}

Status decode_notice(const uint8_t* bytes, size_t size, Notice* out) {
  if (size < kNoticeHeaderBytes || size > kMaxNoticeBytes) {
    return RemoteError("notice of " + std::to_string(size) + " bytes, expected " + std::to_string(kNoticeHeaderBytes) +
                       ".." + std::to_string(kMaxNoticeBytes));
  }
  if (get<uint32_t>(bytes, 0) != kNoticeMagic) return RemoteError("notice with a bad magic number");
  if (bytes[4] != kVersion) return RemoteError("notice of version " + std::to_string(bytes[4]));
  if (bytes[5] == 0 || bytes[5] > static_cast<uint8_t>(NoticeKind::kLast)) {
    return RemoteError("notice of kind " + std::to_string(bytes[5]) + ", which does not exist");
  }
  const size_t text = get<uint16_t>(bytes, 6);
  if (kNoticeHeaderBytes + text != size) {
    return RemoteError("notice says " + std::to_string(text) + " bytes of text but carries " +
                       std::to_string(size - kNoticeHeaderBytes));
  }
  Notice n;
  n.kind = static_cast<NoticeKind>(bytes[5]);
  n.sequence = get<uint32_t>(bytes, 8);
  n.origin = static_cast<int32_t>(get<uint32_t>(bytes, 12));
  // The text is shown to users: keep it printable.
  n.text.reserve(text);
  for (size_t i = 0; i < text; ++i) {
    const char c = static_cast<char>(bytes[kNoticeHeaderBytes + i]);
    n.text.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  *out = std::move(n);
  return Status::Ok();
}

}  // namespace rr::wire
