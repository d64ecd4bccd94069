#pragma once
// soak_rank's command line: what to run, for how long, and the fuzzer's
// knobs (idle pauses, random ring shapes, communicators on threads). Every
// option that shapes the sequence of calls is part of replay_options(), so a
// failure's report names a command that draws the same calls again.

#include <cstddef>
#include <cstdint>
#include <string>

namespace soak {

// RSS may wander by the allocator's caching of freed blocks and by pages the
// engine touches once (pools, UCX's rendezvous buffers); a leak of a few
// bytes per call over a million calls, or of one buffer per call, grows
// past this.
constexpr double kDefaultRssToleranceMiB = 8;

struct Options {
  double seconds = 60;
  double warmup_seconds = 10;
  double sample_seconds = 5;
  uint64_t seed = 1;
  size_t max_bytes = size_t{64} << 20;
  int slots = 4;
  std::string json;
  double rss_tolerance_mib = kDefaultRssToleranceMiB;
  bool shm_entries_check = true;
  uint64_t corrupt_call = UINT64_MAX;
  // The fuzzer's: all off by default, so a plain soak runs as it always did.
  double idle_max_ms = 0;      // after a batch, sometimes sleep 0..this, drawn per rank
  double idle_chance = 0.25;   // how often a batch is followed by a pause
  bool random_shapes = false;  // each split communicator gets a drawn chunk size and pipeline depth
  bool threads = false;        // a batch's communicators are driven from one thread each
};

// Exits with status 2 and the usage on a bad option; with 0 after --help.
Options parse_options(int argc, char** argv);

// The options as soak_rank takes them, every one spelled out (the seed too,
// when it was left at its default), for the replay line of a failure.
std::string replay_options(const Options& o);

}  // namespace soak
