#include "exec/stall.hpp"

namespace rr::exec {

Status stalled(const Call& call, Code code, const Stall& stall, const std::string& cause) {
  std::string text = call.name();
  text += code == Code::kTimeout ? " timed out" : code == Code::kOk ? " in progress" : " failed";
  text += ": rank " + std::to_string(stall.rank);
  const std::string chunk = std::to_string(stall.chunk);
  const std::string step =
      stall.phase ? " of " + std::string(stall.phase) + " step " + std::to_string(stall.phase_step) : std::string();
  const std::string peer = std::to_string(stall.peer);
  switch (stall.wait) {
    case Stall::Wait::kNothing: break;
    case Stall::Wait::kChunk: text += " waited for chunk " + chunk + step + " from rank " + peer; break;
    case Stall::Wait::kTake: text += " waited for rank " + peer + " to take chunk " + chunk + step; break;
    case Stall::Wait::kRoom: text += " waited for rank " + peer + " to take a chunk before chunk " + chunk + step; break;
  }
  if (stall.path) text += " (" + std::string(stall.path) + ")";
  if (stall.total > 0) {
    text += " (" + std::to_string(stall.done) + " of " + std::to_string(stall.total) + " " + stall.unit + " done)";
  }
  if (!cause.empty()) text += ": " + cause;
  return Status(code, std::move(text));
}

}  // namespace rr::exec
