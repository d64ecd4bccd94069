#pragma once
// Making a communicator: rendezvous, transport, address exchange, pool.

#include <memory>

#include "comm/communicator.hpp"
#include "common/status.hpp"
#include "ringreduce/ringreduce.h"

namespace rr::setup {

Status unique_id(rrUniqueId* id);
// `how` is a const rrUniqueId*.
Status from_unique_id(const void* how, int nranks, int rank, const rrConfig_t* config,
                      std::unique_ptr<Communicator>* out);
// rrCommGrow's: the communicator of `nranks` on `id` (made by rrCommGetUniqueId
// on the old communicator), as rank `rank`, with the old one's `settings`.
Status grown(const rrUniqueId& id, int nranks, int rank, const Settings& settings, std::unique_ptr<Communicator>* out);
// `how` is a const char* init URL.
Status from_url(const void* how, int nranks, int rank, const rrConfig_t* config,
                std::unique_ptr<Communicator>* out);

}  // namespace rr::setup
