#pragma once
// Per-communicator settings: the config struct's explicit fields win, then
// RR_* environment variables, then the defaults below.

#include <cstddef>
#include <cstdint>
#include <string>

#include "algo/select.hpp"
#include "common/status.hpp"
#include "ringreduce/ringreduce.h"

namespace rr {

// Where a setting's value came from, as rr-info and the init log say it.
struct Source {
  enum class Kind : uint8_t { kDefault, kEnvironment, kConfig, kMeasured, kPeer };
  Kind kind = Kind::kDefault;
  // kEnvironment: the variable ("RR_CHUNK_BYTES"); kMeasured: what was
  // measured; kPeer: whose value it is and why.
  std::string detail;

  static Source environment(const char* variable) { return {Kind::kEnvironment, variable}; }
  static Source config() { return {Kind::kConfig, {}}; }
  bool is_default() const { return kind == Kind::kDefault; }
  // "default", "env RR_CHUNK_BYTES", "config", "auto: a 0.200 ms round trip
  // at 10.0 Gbit/s", "rank 3's, the largest"
  std::string text() const;
};

struct Settings {
  // 512 KiB chunks: large enough that UCX moves them by its zero-copy
  // rendezvous protocol at full bandwidth, small enough that a 64 MiB tensor
  // on 8 ranks still has 16 chunks per segment to pipeline.
  size_t chunk_bytes = size_t{512} << 10;
  // Four columns in flight keep the link busy while a chunk is being reduced
  // and the next is on the wire, for 4 x 2 x chunk_bytes of staging memory.
  // Unless RR_PIPELINE_DEPTH or the config sets it (pipeline_depth_auto
  // false), init raises it to cover the round trip to a ring neighbour on
  // another host at the link's rate (algo/pipeline.hpp,
  // comm/pipeline_sizing.cpp): a long link needs more bytes in flight.
  int pipeline_depth = kDefaultPipelineDepth;
  bool pipeline_depth_auto = true;
  // The link rate the sizing assumes, Gbit/s: RR_LINK_GBPS, else (0) the
  // speed the fastest network interface reports (UCX_NET_DEVICES' if set;
  // topo/link_speed.hpp), else kDefaultLinkGbps.
  double link_gbps = 0;
  // Five minutes: longer than any sane collective on a slow link, shorter
  // than a job scheduler's patience.
  int timeout_ms = 300000;
  int debug_level = 0;
  // Each collective checks that every rank called it with the same
  // arguments, so that mismatched calls fail on every rank, naming both
  // ranks' arguments, instead of hanging or reducing garbage. Recursive
  // doubling (small allreduces, barrier) carries the 32-byte header in its
  // messages, for free; the others first exchange it with both ring
  // neighbours, one neighbour round trip.
  bool check_arguments = true;
  // Device buffers go through pinned host memory in segments of this size
  // (comm/staged_collectives.hpp), three slots of it per communicator: 8 MiB
  // is long enough that a PCIe copy runs at its full rate and that the ring
  // pipelines its chunks inside a segment, short enough that 24 MiB of
  // pinned memory per communicator is cheap.
  size_t gpu_segment_bytes = size_t{8} << 20;
  // Who reduces the chunks a staged allreduce receives: the host (false), or
  // a CUDA kernel reading them from pinned memory beside the device copy of
  // this rank's values (true; then only this rank's own ring segment is
  // copied to the host). RR_GPU_REDUCE=host|device.
  bool gpu_reduce_on_device = false;

  // The allreduce schedule: auto (the model below decides by size and rank
  // count), ring, rd (recursive doubling), hd (halving-doubling) or oneshot
  // (the shared-memory board). RR_ALGO.
  algo::AllreduceAlgo allreduce_algo = algo::AllreduceAlgo::kAuto;
  // The machine's alpha-beta-gamma constants the choice is made from:
  // RR_MODEL_ALPHA_US (per message), RR_MODEL_MOVE_GBPS (bytes moved),
  // RR_MODEL_REDUCE_GBPS (bytes reduced).
  algo::CostModel model;

  // The order the ring and the chain visit the ranks (algo/ring_order.hpp):
  // each host's ranks one after another (true), or rank order (false).
  // RR_RING_ORDER=topology|rank.
  bool ring_order_by_topology = true;

  // The ring's data path when every rank runs on this host: slot rings in
  // shared memory (true; exec/shm_ring_executor.hpp), or UCX (false, as
  // between hosts). RR_SAME_HOST=shm|ucx.
  bool same_host_shm = true;
  // Each rank's ring from its left neighbour: RR_SHM_SLOTS slots of
  // RR_SHM_SLOT_BYTES. 4 x 256 KiB: a chunk large enough that handing it
  // over (two cache lines of counters between cores, and a context switch
  // where ranks share cores) is noise beside reducing it; 64 KiB slots
  // measured 1.5-4 x slower from 512 KiB to 32 MiB at 2 ranks on an EPYC,
  // and as fast on a Xeon (bench/RESULTS.md, "Slot size").
  size_t shm_slot_bytes = size_t{256} << 10;
  int shm_slots = 4;
  // The same-host board of the one-shot schedules (coll/one_shot.hpp): each
  // rank publishes up to this many bytes of data at a time (a multiple of
  // 64; 0: no board, small calls take recursive doubling over UCX).
  // RR_SHM_BOARD_BYTES. Two buffers per rank: 64 KiB a rank by default.
  size_t shm_board_bytes = size_t{32} << 10;
  // From how many bytes a same-host ring out of place writes its output with
  // non-temporal stores (reduce/stream_copy.hpp; 0: never).
  // RR_SHM_STREAM_BYTES. An output that no longer fits the caches is not
  // read back by the call: a streamed line is written without being read
  // first (bench/RESULTS.md, "Memory traffic on one host"). Unset, this is
  // the cap: streaming starts where the ranks' buffers outgrow the
  // last-level cache (algo::stream_threshold; bench/RESULTS.md,
  // "Streaming from the last-level cache's share").
  size_t shm_stream_bytes = size_t{32} << 20;

  // Where each value came from.
  Source chunk_bytes_source;
  Source pipeline_depth_source;
  Source link_gbps_source;
  Source timeout_ms_source;
  Source check_arguments_source;
  Source gpu_segment_bytes_source;
  Source gpu_reduce_source;
  Source allreduce_algo_source;
  Source model_source;
  Source ring_order_source;
  Source same_host_source;
  Source shm_slot_bytes_source;
  Source shm_slots_source;
  Source shm_board_bytes_source;
  Source shm_stream_bytes_source;

  static constexpr size_t kMinChunkBytes = 64;
  static constexpr size_t kMaxChunkBytes = size_t{1} << 30;
  static constexpr int kDefaultPipelineDepth = 4;
  static constexpr int kMaxPipelineDepth = 64;
  static constexpr double kDefaultLinkGbps = 10;
  static constexpr int kMaxShmSlots = 64;
  static constexpr size_t kMaxShmBoardBytes = size_t{16} << 20;
  static constexpr size_t kMaxShmStreamBytes = size_t{1} << 50;
};

// Resolves the settings for a new communicator; `config` may be null.
Status resolve_settings(const rrConfig_t* config, Settings* out);

}  // namespace rr
