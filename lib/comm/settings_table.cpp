#include "comm/settings_table.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "algo/select.hpp"
#include "common/env.hpp"
#include "topo/link_speed.hpp"

namespace rr {

namespace {

using Scope = SettingSpec::Scope;

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

// The parsers each kind of setting shares; each names the variable when it refuses.

// A size with K/M/G suffixes in [min, max], a multiple of `multiple`.
template <size_t Settings::*Field, Source Settings::*From, uint64_t Min, uint64_t Max, uint64_t Multiple = 1>
Status bytes(const SettingSpec& spec, Settings* s) {
  uint64_t value = 0;
  bool found = false;
  RR_RETURN_IF_ERROR(env_size(spec.variable, Min, Max, &value, &found));
  if (!found) return Status::Ok();
  if (value % Multiple != 0) {
    return InvalidArgument(std::string(spec.variable) + "=" + std::to_string(value) + ": expected a multiple of " +
                           std::to_string(Multiple) + (Min == 0 ? " (0: none)" : ""));
  }
  s->*Field = value;
  s->*From = Source::environment(spec.variable);
  return Status::Ok();
}

// An integer in [min, max].
template <int Settings::*Field, Source Settings::*From, int64_t Min, int64_t Max>
Status integer(const SettingSpec& spec, Settings* s) {
  int64_t value = 0;
  bool found = false;
  RR_RETURN_IF_ERROR(env_int(spec.variable, Min, Max, &value, &found));
  if (!found) return Status::Ok();
  s->*Field = static_cast<int>(value);
  s->*From = Source::environment(spec.variable);
  return Status::Ok();
}

// One of two words: the field is true for the second (or, with
// FirstIsTrue, for the first).
template <bool Settings::*Field, Source Settings::*From, const char* const* Words, bool FirstIsTrue = false>
Status either(const SettingSpec& spec, Settings* s) {
  const char* text = env_str(spec.variable);
  if (!text) return Status::Ok();
  const std::string value = text;
  if (value != Words[0] && value != Words[1]) {
    return InvalidArgument(std::string(spec.variable) + "=" + value + ": expected " + Words[0] + " or " + Words[1]);
  }
  s->*Field = (value == Words[0]) == FirstIsTrue;
  s->*From = Source::environment(spec.variable);
  return Status::Ok();
}
template <bool Settings::*Field, const char* const* Words, bool FirstIsTrue = false>
std::string either_value(const Settings& s) {
  return Words[(s.*Field) == FirstIsTrue ? 0 : 1];
}

// A positive number, times `scale`, into `value` (the cost model's).
Status positive(const char* variable, double scale, double* value, bool* found) {
  *found = false;
  const char* text = env_str(variable);
  if (!text) return Status::Ok();
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0) || v > 1e12) {
    return InvalidArgument(std::string(variable) + "=" + text + ": expected a positive number");
  }
  *value = v * scale;
  *found = true;
  return Status::Ok();
}

// Microseconds per message into seconds; GB/s into seconds per byte.
template <double algo::CostModel::*Field>
Status model_microseconds(const SettingSpec& spec, Settings* s) {
  bool found = false;
  RR_RETURN_IF_ERROR(positive(spec.variable, 1e-6, &(s->model.*Field), &found));
  if (found) s->model_source = Source::environment(spec.variable);
  return Status::Ok();
}
template <double algo::CostModel::*Field>
Status model_rate(const SettingSpec& spec, Settings* s) {
  double gbps = 0;
  bool found = false;
  RR_RETURN_IF_ERROR(positive(spec.variable, 1.0, &gbps, &found));
  if (found) s->model.*Field = 1.0 / (gbps * 1e9), s->model_source = Source::environment(spec.variable);
  return Status::Ok();
}
// The model's variables share one source in Settings (the last one set): each row names its own.
Source own_variable(const SettingSpec& spec, const Settings&) {
  return env_str(spec.variable) ? Source::environment(spec.variable) : Source();
}

template <Source Settings::*From>
Source from(const SettingSpec&, const Settings& s) {
  return s.*From;
}

Status pipeline_depth(const SettingSpec& spec, Settings* s) {
  const char* text = env_str(spec.variable);
  if (text && std::string(text) == "auto") {
    s->pipeline_depth_source = Source::environment(spec.variable);  // as unset: sized at init
    return Status::Ok();
  }
  int64_t value = 0;
  bool found = false;
  const Status depth = env_int(spec.variable, 1, Settings::kMaxPipelineDepth, &value, &found);
  if (!depth.ok()) return InvalidArgument(depth.message() + " or auto");
  if (found) {
    s->pipeline_depth = static_cast<int>(value), s->pipeline_depth_auto = false;
    s->pipeline_depth_source = Source::environment(spec.variable);
  }
  return Status::Ok();
}

Status link_gbps(const SettingSpec& spec, Settings* s) {
  bool found = false;
  RR_RETURN_IF_ERROR(positive(spec.variable, 1.0, &s->link_gbps, &found));
  if (found) s->link_gbps_source = Source::environment(spec.variable);
  return Status::Ok();
}

// The link rate the pipeline sizing assumes: the setting, else the fastest
// interface's reported speed (UCX_NET_DEVICES' if set), else the default.
std::string link_gbps_value(const Settings& s) {
  if (s.link_gbps > 0) return number(s.link_gbps);
  const topo::LinkSpeed link = topo::fastest_link(topo::ucx_net_devices());
  if (link.gbps > 0) return "auto (" + number(link.gbps) + " Gbit/s, " + link.device + ")";
  return "auto (no interface reports a speed: " + number(Settings::kDefaultLinkGbps) + ")";
}

Status allreduce_algo(const SettingSpec& spec, Settings* s) {
  const char* text = env_str(spec.variable);
  if (!text) return Status::Ok();
  if (!algo::parse_algo(text, &s->allreduce_algo)) {
    return InvalidArgument(std::string(spec.variable) + "=" + text +
                           ": expected auto, ring, rd (recursive doubling), hd (halving-doubling) or oneshot "
                           "(shared-memory board)");
  }
  s->allreduce_algo_source = Source::environment(spec.variable);
  return Status::Ok();
}

constexpr const char* kHostDevice[] = {"host", "device"};
constexpr const char* kTopologyRank[] = {"topology", "rank"};
constexpr const char* kShmUcx[] = {"shm", "ucx"};

constexpr int64_t kWeekMs = 7 * 24 * 3600 * 1000LL;

// rrConfig_t fields. A caller built against an older, smaller struct lacks
// the later ones: a field is read only when config.size covers it.
template <typename T, T rrConfig_t::*Field>
bool config_has(const rrConfig_t& c) {
  const auto offset = static_cast<size_t>(reinterpret_cast<const char*>(&(c.*Field)) - reinterpret_cast<const char*>(&c));
  return offset + sizeof(T) <= c.size;
}

Status config_refused(const SettingSpec& spec, int64_t value, const std::string& expected) {
  return InvalidArgument(std::string("config.") + spec.config_field + "=" + std::to_string(value) + ": " + expected);
}

// A byte size in the chunk range; 0 keeps the default or the environment's value.
template <size_t rrConfig_t::*Field, size_t Settings::*To, Source Settings::*From>
Status config_bytes(const SettingSpec& spec, const rrConfig_t& c, Settings* s) {
  if (!config_has<size_t, Field>(c) || c.*Field == 0) return Status::Ok();
  const size_t value = c.*Field;
  if (value < Settings::kMinChunkBytes || value > Settings::kMaxChunkBytes) {
    return config_refused(spec, static_cast<int64_t>(value),
                          "expected " + std::to_string(Settings::kMinChunkBytes) + ".." +
                              std::to_string(Settings::kMaxChunkBytes));
  }
  s->*To = value;
  s->*From = Source::config();
  return Status::Ok();
}

// An int field in [Min, Max]; RR_CONFIG_UNDEF_INT keeps the default or the environment's value.
template <int rrConfig_t::*Field, int64_t Min, int64_t Max>
bool config_int(const SettingSpec& spec, const rrConfig_t& c, int* value, Status* refused) {
  if (!config_has<int, Field>(c) || c.*Field == RR_CONFIG_UNDEF_INT) return false;
  *value = c.*Field;
  if (*value < Min || *value > Max) {
    *refused = config_refused(spec, *value, Min == 0 && Max == 1 ? std::string("expected 0 or 1")
                                                                  : "expected " + std::to_string(Min) + ".." +
                                                                        std::to_string(Max));
    return false;
  }
  return true;
}

template <size_t rrConfig_t::*Field>
void set_config_size(rrConfig_t* c, int64_t value) {
  c->*Field = static_cast<size_t>(value);
}

template <int rrConfig_t::*Field>
void set_config_int(rrConfig_t* c, int64_t value) {
  c->*Field = static_cast<int>(value);
}

// In a function: a static initialiser elsewhere may resolve settings.
std::vector<SettingSpec> make_specs() {
  return {
    {"RR_CHUNK_BYTES", "chunk_bytes", Scope::kCommunicator, "512K",
     "largest piece of a ring segment moved as one message",
     bytes<&Settings::chunk_bytes, &Settings::chunk_bytes_source, Settings::kMinChunkBytes, Settings::kMaxChunkBytes>,
     [](const Settings& s) { return std::to_string(s.chunk_bytes); }, from<&Settings::chunk_bytes_source>,
     config_bytes<&rrConfig_t::chunk_bytes, &Settings::chunk_bytes, &Settings::chunk_bytes_source>,
     set_config_size<&rrConfig_t::chunk_bytes>},
    {"RR_PIPELINE_DEPTH", "pipeline_depth", Scope::kCommunicator, "auto (≥ 4)",
     "chunk columns in flight; auto raises it for a long link", pipeline_depth,
     // Auto: the default is a floor; init raises it to cover the round trip
     // to a ring neighbour on another host (comm/pipeline_sizing.cpp).
     [](const Settings& s) {
       return s.pipeline_depth_auto ? "auto (>= " + std::to_string(s.pipeline_depth) + ")"
                                    : std::to_string(s.pipeline_depth);
     },
     from<&Settings::pipeline_depth_source>,
     [](const SettingSpec& spec, const rrConfig_t& c, Settings* s) {
       int value = 0;
       Status refused;
       if (config_int<&rrConfig_t::pipeline_depth, 1, Settings::kMaxPipelineDepth>(spec, c, &value, &refused)) {
         s->pipeline_depth = value, s->pipeline_depth_auto = false, s->pipeline_depth_source = Source::config();
       }
       return refused;
     },
     set_config_int<&rrConfig_t::pipeline_depth>},
    {"RR_LINK_GBPS", nullptr, Scope::kCommunicator, "the NIC's speed", "the link rate the depth is sized for",
     link_gbps, link_gbps_value, from<&Settings::link_gbps_source>},
    {"RR_TIMEOUT_MS", "timeout_ms", Scope::kCommunicator, "300000", "deadline of init and of each operation",
     integer<&Settings::timeout_ms, &Settings::timeout_ms_source, 1, kWeekMs>,
     [](const Settings& s) { return std::to_string(s.timeout_ms); }, from<&Settings::timeout_ms_source>,
     [](const SettingSpec& spec, const rrConfig_t& c, Settings* s) {
       int value = 0;
       Status refused;
       if (config_int<&rrConfig_t::timeout_ms, 1, INT32_MAX>(spec, c, &value, &refused)) {
         s->timeout_ms = value, s->timeout_ms_source = Source::config();
       }
       return refused;
     },
     set_config_int<&rrConfig_t::timeout_ms>},
    {"RR_CHECK_ARGUMENTS", "check_arguments", Scope::kCommunicator, "1",
     "every rank checks that all called the same collective, count, type, op, root and cut",
     [](const SettingSpec& spec, Settings* s) {
       int64_t value = 0;
       bool found = false;
       RR_RETURN_IF_ERROR(env_int(spec.variable, 0, 1, &value, &found));
       if (found) s->check_arguments = value != 0, s->check_arguments_source = Source::environment(spec.variable);
       return Status::Ok();
     },
     [](const Settings& s) { return std::string(s.check_arguments ? "1" : "0"); },
     from<&Settings::check_arguments_source>,
     [](const SettingSpec& spec, const rrConfig_t& c, Settings* s) {
       int value = 0;
       Status refused;
       if (config_int<&rrConfig_t::check_arguments, 0, 1>(spec, c, &value, &refused)) {
         s->check_arguments = value != 0, s->check_arguments_source = Source::config();
       }
       return refused;
     },
     set_config_int<&rrConfig_t::check_arguments>},
    {"RR_ALGO", nullptr, Scope::kCommunicator, "auto", "allreduce schedule: `ring`, `rd`, `hd`, `oneshot` or `auto`",
     allreduce_algo, [](const Settings& s) { return std::string(algo::algo_name(s.allreduce_algo)); },
     from<&Settings::allreduce_algo_source>},
    {"RR_RING_ORDER", nullptr, Scope::kCommunicator, "topology", "`topology`: each host's ranks in a row; `rank`: 0..N-1",
     either<&Settings::ring_order_by_topology, &Settings::ring_order_source, kTopologyRank, true>,
     either_value<&Settings::ring_order_by_topology, kTopologyRank, true>,
     from<&Settings::ring_order_source>},
    {"RR_SAME_HOST", nullptr, Scope::kCommunicator, "shm", "ranks of one host: `shm` slot rings or `ucx`",
     either<&Settings::same_host_shm, &Settings::same_host_source, kShmUcx, true>,
     either_value<&Settings::same_host_shm, kShmUcx, true>, from<&Settings::same_host_source>},
    {"RR_SHM_SLOT_BYTES", nullptr, Scope::kCommunicator, "256K", "each rank's shared-memory slot ring: slot size",
     bytes<&Settings::shm_slot_bytes, &Settings::shm_slot_bytes_source, Settings::kMinChunkBytes,
           Settings::kMaxChunkBytes, 64>,
     [](const Settings& s) { return std::to_string(s.shm_slot_bytes); }, from<&Settings::shm_slot_bytes_source>},
    {"RR_SHM_SLOTS", nullptr, Scope::kCommunicator, "4", "each rank's shared-memory slot ring: slots",
     integer<&Settings::shm_slots, &Settings::shm_slots_source, 2, Settings::kMaxShmSlots>,
     [](const Settings& s) { return std::to_string(s.shm_slots); }, from<&Settings::shm_slots_source>},
    {"RR_SHM_BOARD_BYTES", nullptr, Scope::kCommunicator, "32K",
     "one-shot board for small allreduces and barriers on one host",
     bytes<&Settings::shm_board_bytes, &Settings::shm_board_bytes_source, 0, Settings::kMaxShmBoardBytes, 64>,
     [](const Settings& s) { return std::to_string(s.shm_board_bytes); }, from<&Settings::shm_board_bytes_source>},
    {"RR_SHM_STREAM_BYTES", nullptr, Scope::kCommunicator, "32M",
     "same-host ring out of place: from this size the output is written with non-temporal stores (0: never; "
     "unset: at most this, less where the ranks' buffers outgrow the last-level cache)",
     bytes<&Settings::shm_stream_bytes, &Settings::shm_stream_bytes_source, 0, Settings::kMaxShmStreamBytes, 1>,
     [](const Settings& s) { return std::to_string(s.shm_stream_bytes); }, from<&Settings::shm_stream_bytes_source>},
    {"RR_MODEL_ALPHA_US", nullptr, Scope::kCommunicator, "2", "the selector's α-β-γ model: µs per message",
     model_microseconds<&algo::CostModel::alpha_s>, [](const Settings& s) { return number(s.model.alpha_s * 1e6); },
     own_variable},
    {"RR_MODEL_REMOTE_ALPHA_US", nullptr, Scope::kCommunicator, "2",
     "the model: µs per message between hosts (default: RR_MODEL_ALPHA_US's)",
     model_microseconds<&algo::CostModel::remote_alpha_s>,
     [](const Settings& s) { return number(s.model.remote_alpha() * 1e6); }, own_variable},
    {"RR_MODEL_SLOT_ALPHA_US", nullptr, Scope::kCommunicator, "0.3",
     "the model: µs per message on same-host slot rings", model_microseconds<&algo::CostModel::slot_alpha_s>,
     [](const Settings& s) { return number(s.model.slot_alpha_s * 1e6); }, own_variable},
    {"RR_MODEL_MOVE_GBPS", nullptr, Scope::kCommunicator, "6.67", "the model: GB/s moved",
     model_rate<&algo::CostModel::beta_s_per_byte>,
     [](const Settings& s) { return number(1.0 / (s.model.beta_s_per_byte * 1e9)); }, own_variable},
    {"RR_MODEL_REDUCE_GBPS", nullptr, Scope::kCommunicator, "4", "the model: GB/s reduced",
     model_rate<&algo::CostModel::gamma_s_per_byte>,
     [](const Settings& s) { return number(1.0 / (s.model.gamma_s_per_byte * 1e9)); }, own_variable},
    {"RR_GPU_SEGMENT_BYTES", "gpu_segment_bytes", Scope::kCommunicator, "8M", "staging segment of device buffers",
     bytes<&Settings::gpu_segment_bytes, &Settings::gpu_segment_bytes_source, Settings::kMinChunkBytes,
           Settings::kMaxChunkBytes>,
     [](const Settings& s) { return std::to_string(s.gpu_segment_bytes); }, from<&Settings::gpu_segment_bytes_source>,
     config_bytes<&rrConfig_t::gpu_segment_bytes, &Settings::gpu_segment_bytes, &Settings::gpu_segment_bytes_source>,
     set_config_size<&rrConfig_t::gpu_segment_bytes>},
    {"RR_GPU_REDUCE", nullptr, Scope::kCommunicator, "host", "who reduces staged device chunks: `host` or `device`",
     either<&Settings::gpu_reduce_on_device, &Settings::gpu_reduce_source, kHostDevice>,
     either_value<&Settings::gpu_reduce_on_device, kHostDevice>, from<&Settings::gpu_reduce_source>},
    {"RR_WAIT_POLICY", nullptr, Scope::kProcess, "auto", "`sleep`, `yield`, `spin`; auto yields when ranks outnumber cores"},
    {"RR_DEBUG", "debug_level", Scope::kProcess, "WARN", "`INFO` prints setup decisions", nullptr, nullptr, nullptr,
     // Recorded in the communicator's settings; the log level itself is the
     // process's, from RR_DEBUG (common/log.cpp).
     [](const SettingSpec&, const rrConfig_t& c, Settings* s) {
       if (config_has<int, &rrConfig_t::debug_level>(c) && c.debug_level != RR_CONFIG_UNDEF_INT) {
         s->debug_level = c.debug_level;
       }
       return Status::Ok();
     }},
    {"RR_GPU_STREAM_MEMOPS", nullptr, Scope::kCuda, "auto", "stream memory operations or counter kernels"},
    {"RR_BOOTSTRAP_HOST", nullptr, Scope::kBootstrap, "first non-loopback IPv4", "what a unique id advertises"},
    {"RR_SOCKET_IFNAME", nullptr, Scope::kBootstrap, "—", "the interface whose address a unique id advertises"},
    {"RR_BIND_ADDR", nullptr, Scope::kBootstrap, "the rendezvous address", "where the rank-0 store binds"},
    {"RR_AUTH_TOKEN", nullptr, Scope::kBootstrap, "—", "the job's secret; required off loopback"},
  };
}

}  // namespace

const std::vector<SettingSpec>& setting_specs() {
  static const std::vector<SettingSpec> specs = make_specs();
  return specs;
}

}  // namespace rr
