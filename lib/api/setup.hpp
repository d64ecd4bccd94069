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
// `how` is a const char* init URL.
Status from_url(const void* how, int nranks, int rank, const rrConfig_t* config,
                std::unique_ptr<Communicator>* out);

}  // namespace rr::setup
