#include "exec/call.hpp"

#include <charconv>

namespace rr::exec {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kReduceScatter: return "reduce-scatter";
    case Collective::kAllGather: return "all-gather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kGather: return "gather";
    case Collective::kScatter: return "scatter";
    case Collective::kAllToAll: return "all-to-all";
    case Collective::kBarrier: return "barrier";
    case Collective::kAllToAllv: return "all-to-all-v";
  }
  return "unknown collective";
}

Clock::time_point Call::until() {
  if (deadline == Clock::time_point{}) deadline = Clock::now() + timeout;
  return deadline;
}

namespace {

void append_name(Collective c, uint64_t sequence, std::string* out) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof(digits), sequence).ptr;
  out->append(collective_name(c)).append(" #").append(digits, static_cast<size_t>(end - digits));
}

}  // namespace

std::string call_name(Collective c, uint64_t sequence) {
  std::string text;
  append_name(c, sequence, &text);
  return text;
}

std::string Call::name() const { return call_name(collective, sequence); }

void Call::write_label(std::string* out) const {
  out->clear();
  append_name(collective, sequence, out);
  if (schedule != algo::Schedule::kNone) out->append(" (").append(algo::schedule_word(schedule)).append(")");
}

std::string Call::label() const {
  std::string text;
  write_label(&text);
  return text;
}

Status Call::error(Code code, std::string_view text) const {
  std::string message = name();
  message.append(": ").append(text);
  return Status(code, std::move(message));
}

}  // namespace rr::exec
