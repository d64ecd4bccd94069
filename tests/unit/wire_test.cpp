// The operation header (lib/exec/wire.hpp): what a rank tells its ring
// neighbours about a call, the ring's shape included, survives the wire and
// tells calls apart; a header that is not one is refused.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "exec/wire.hpp"

namespace {

using rr::wire::Collective;
using rr::wire::OpHeader;

OpHeader ring_allreduce() {
  OpHeader h;
  h.collective = Collective::kAllReduce;
  h.dtype = rrFloat32;
  h.op = rrSum;
  h.sequence = 180;
  h.count = 6291463;
  h.root = -1;
  h.shape.chunk_elems = 196609;
  h.shape.depth = 4;
  return h;
}

OpHeader round_trip(const OpHeader& h) {
  uint8_t bytes[rr::wire::kOpHeaderBytes];
  rr::wire::encode_header(h, bytes);
  OpHeader back;
  EXPECT_TRUE(rr::wire::decode_header(bytes, sizeof(bytes), &back).ok());
  return back;
}

TEST(OpHeader, EveryFieldSurvivesTheWire) {
  const OpHeader h = ring_allreduce();
  const OpHeader back = round_trip(h);
  EXPECT_EQ(back, h);
  EXPECT_EQ(back.shape.chunk_elems, 196609u);
  EXPECT_EQ(back.shape.depth, 4);
  EXPECT_EQ(back.count, 6291463u);
  EXPECT_EQ(back.sequence, 180u);
  OpHeader rooted;
  rooted.collective = Collective::kBroadcast;
  rooted.root = 32767;  // the largest root of 2^15 ranks
  EXPECT_EQ(round_trip(rooted).root, 32767);
}

TEST(OpHeader, AnotherCutIsAnotherCall) {
  const OpHeader mine = ring_allreduce();
  OpHeader other_chunk = mine, other_depth = mine, no_ring = mine;
  other_chunk.shape.chunk_elems = 174763;  // 9 columns of the segment, not 8
  other_depth.shape.depth = 5;
  no_ring.shape = {};  // a rank that took another schedule
  EXPECT_NE(round_trip(other_chunk), mine);
  EXPECT_NE(round_trip(other_depth), mine);
  EXPECT_NE(round_trip(no_ring), mine);
}

TEST(OpHeader, TheDescriptionNamesTheCut) {
  EXPECT_EQ(round_trip(ring_allreduce()).describe(),
            "allreduce #180 (count=6291463, dtype=float32, op=sum, chunks of 196609 elements, depth 4)");
  OpHeader gather;
  gather.collective = Collective::kGather;
  gather.dtype = rrInt32;
  gather.count = 10;
  gather.root = 2;
  EXPECT_EQ(gather.describe(), "gather #0 (count=10, dtype=int32, root=2)");
}

TEST(OpHeader, WhatIsNotAHeaderIsRefused) {
  uint8_t bytes[rr::wire::kOpHeaderBytes];
  rr::wire::encode_header(ring_allreduce(), bytes);
  OpHeader out;
  EXPECT_FALSE(rr::wire::decode_header(bytes, sizeof(bytes) - 1, &out).ok());
  uint8_t old_version[sizeof(bytes)];
  std::copy(bytes, bytes + sizeof(bytes), old_version);
  old_version[4] = 1;  // before the ring's shape was in it
  const rr::Status refused = rr::wire::decode_header(old_version, sizeof(old_version), &out);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("version 1"), std::string::npos) << refused.message();
  uint8_t reserved[sizeof(bytes)];
  std::copy(bytes, bytes + sizeof(bytes), reserved);
  reserved[27] = 1;
  EXPECT_FALSE(rr::wire::decode_header(reserved, sizeof(reserved), &out).ok());
}

}  // namespace
