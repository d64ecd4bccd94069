#pragma once
// The two small messages ranks exchange about operations, besides the data:
//
// The operation header (32 bytes) each rank sends its two ring neighbours
// before a collective, so that ranks which called different collectives, or
// the same one with a different count, datatype, op or root, or which would
// cut it into different chunks (RingShape), find out and say so instead of
// hanging or reducing garbage:
//
//   u32 magic "RROP" | u8 version (2) | u8 collective | u8 dtype | u8 op |
//   u64 sequence | u64 count | i16 root | u8 depth | u8 reserved (0) |
//   u32 chunk elements
//
// The notice (16-byte header + up to kMaxNoticeText bytes of text) a rank
// sends every other rank when it gives up on the communicator (a mismatch, a
// dead or silent peer, an abort), so that ranks which are not its neighbours
// learn the cause at once instead of waiting out their timeout:
//
//   u32 magic "RRNT" | u8 version | u8 kind | u16 text_length |
//   u32 sequence (low 32 bits) | i32 origin rank | text
//
// All integers little-endian. The decoders accept any bytes: whatever the
// network hands them, they return an error rather than read past the end.

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.hpp"
#include "exec/call.hpp"
#include "ringreduce/ringreduce.h"

namespace rr::wire {

// The collective a header names: exec/call.hpp numbers them.
using exec::Collective;
using exec::collective_name;

// How a pipelined schedule (the ring, the chain) cuts a call: every rank
// must cut it alike, or its messages do not match the peers' (a length
// error at best, a hang at worst). All zero for the other schedules. The
// columns (chunks per segment) follow from the chunk, the count and the
// number of ranks, which the header compares too.
struct RingShape {
  uint32_t chunk_elems = 0;  // elements in a full chunk (RR_CHUNK_BYTES, balanced; RR_SHM_SLOT_BYTES)
  uint8_t depth = 0;         // columns in flight (RR_PIPELINE_DEPTH; 0 on the same-host slot rings)

  bool operator==(const RingShape& o) const { return chunk_elems == o.chunk_elems && depth == o.depth; }
};

struct OpHeader {
  Collective collective = Collective::kAllReduce;
  uint8_t dtype = 0;     // rrDataType_t; 0 where the collective has none that matters
  uint8_t op = 0;        // rrRedOp_t; 0 where the collective does not reduce
  uint64_t sequence = 0;
  uint64_t count = 0;    // elements, as the caller passed it
  int32_t root = -1;     // -1 where the collective has no root (16 bits on the wire: kMaxRanks is 2^15)
  RingShape shape;

  bool operator==(const OpHeader& o) const {
    return collective == o.collective && dtype == o.dtype && op == o.op && sequence == o.sequence &&
           count == o.count && root == o.root && shape == o.shape;
  }
  bool operator!=(const OpHeader& o) const { return !(*this == o); }
  // "allreduce #7"
  std::string name() const { return exec::call_name(collective, sequence); }
  // "allreduce #7 (count=1000, dtype=float32, op=sum, chunks of 250
  // elements, depth 4)"
  std::string describe() const;
};
// The header that says `call` to the peers, cut as `shape` says (zero
// where the schedule is not pipelined).
OpHeader header_of(const exec::Call& call, const RingShape& shape = RingShape());

// rank `rank` called `mine`, and `peer` sent `theirs` for the same call:
// kInvalidUsage naming both calls ("allreduce #7: ranks called different
// collectives or passed different arguments: rank 0 called ..., rank 1
// called ...").
Status disagreement(const OpHeader& mine, const OpHeader& theirs, int rank, int peer);

constexpr size_t kOpHeaderBytes = 32;
void encode_header(const OpHeader& h, uint8_t out[kOpHeaderBytes]);
// Not ok (kRemoteError, saying what is wrong) unless `bytes` is a whole,
// well-formed header.
Status decode_header(const uint8_t* bytes, size_t size, OpHeader* out);

enum class NoticeKind : uint8_t {
  kFailed = 1,    // an operation failed on the sender; the text says why
  kMismatch = 2,  // the sender found ranks disagreeing on a call
  kAborted = 3,   // the sender aborted its communicator
  kTimedOut = 4,  // an operation timed out on the sender; the text says what it waited on
  kRevoked = 5,   // the sender revoked the communicator, or heard that a peer did
  kLast = kRevoked,
};

struct Notice {
  NoticeKind kind = NoticeKind::kFailed;
  uint32_t sequence = 0;
  int32_t origin = -1;
  std::string text;
};

constexpr size_t kNoticeHeaderBytes = 16;
constexpr size_t kMaxNoticeText = 1024;
constexpr size_t kMaxNoticeBytes = kNoticeHeaderBytes + kMaxNoticeText;
// Writes at most kMaxNoticeBytes (text beyond kMaxNoticeText is cut); returns the length.
size_t encode_notice(const Notice& n, uint8_t out[kMaxNoticeBytes]);
Status decode_notice(const uint8_t* bytes, size_t size, Notice* out);

}  // namespace rr::wire
