// Running a prepared call blocking or as a request.

#include "prepared_call.hpp"

#include <memory>
#include <utility>

namespace ringreduce_core {

namespace {

// The call's config, in *config (its algorithm points into `algorithm`,
// read during the call); nullptr when it sets nothing.
const rrCollConfig_t* config_for(const char* what, std::optional<double> timeout,
                                 const std::optional<std::string>& algorithm, rrCollConfig_t* config) {
  if (!timeout && !algorithm) return nullptr;
  *config = RR_COLL_CONFIG_INITIALIZER;
  if (timeout) config->timeout_ms = timeout_ms_of(what, *timeout);
  if (algorithm) config->algorithm = algorithm->c_str();
  return config;
}

}  // namespace

void run_blocking(CommState& state, const char* what, Prepared& p, std::optional<double> timeout,
                  const std::optional<std::string>& algorithm) {
  rrCollConfig_t storage;
  const rrCollConfig_t* config = config_for(what, timeout, algorithm, &storage);
  state.call(what, [&](rrComm_t c) { return p.run(c, nullptr, config); });
}

Request run_async(const CommPtr& state, const char* what, Prepared& p, std::optional<double> timeout,
                  const std::optional<std::string>& algorithm) {
  rrCollConfig_t storage;
  const rrCollConfig_t* config = config_for(what, timeout, algorithm, &storage);
  rrRequest_t request = nullptr;
  state->call(what, [&](rrComm_t c) { return p.run(c, &request, config); });
  auto pending = std::make_shared<Pending>();
  pending->what = what;
  pending->request = request;
  pending->buffers = std::move(p.buffers);
  pending->arrays = std::move(p.arrays);
  pending->has_status = p.has_status;
  state->pending.push_back(pending);
  return Request(state, std::move(pending));
}

}  // namespace ringreduce_core
