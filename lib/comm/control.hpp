#pragma once
// The control channel: one small receive posted from every peer, on a tag no
// data message uses, through which a rank that gives up on the communicator
// tells everyone why (lib/exec/wire.hpp, "notice"). Ranks that are not the
// failed rank's neighbours would otherwise learn of it only at their timeout.
//
// Not thread-safe: it is driven by whichever thread drives the transport.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.hpp"
#include "exec/wire.hpp"
#include "transport/transport.hpp"

namespace rr {

class ControlChannel {
 public:
  explicit ControlChannel(transport::Transport* transport) : transport_(transport) {}

  // Posts the receive from every peer. Completions live here; the transport
  // must go before this object does.
  Status start();

  // The first notice that arrived since the last call, after the caller's
  // transport progress. A malformed notice is reported as one from its sender.
  bool poll(wire::Notice* out);

  // Sends `notice` to every peer still alive, once per communicator (later
  // calls do nothing: everyone has already been told it is over), and drives
  // the transport for at most `limit` so the sends leave.
  void tell_everyone(const wire::Notice& notice, std::chrono::milliseconds limit);

  // Cancels the posted receives and waits (at most `limit`) for the
  // transport to retire them; call before the transport closes.
  void close(std::chrono::milliseconds limit);

 private:
  struct Inbox {
    transport::Completion done;
    std::array<uint8_t, wire::kMaxNoticeBytes> bytes;
    bool posted = false;
  };

  Status post(int peer);

  transport::Transport* transport_;
  std::vector<std::unique_ptr<Inbox>> inboxes_;  // [peer]; none for this rank
  std::array<uint8_t, wire::kMaxNoticeBytes> outgoing_{};
  std::vector<transport::Completion> sends_;  // [peer]
  bool told_ = false;
};

}  // namespace rr
