#include "api/setup.hpp"

#include "bootstrap/rendezvous.hpp"
#include "common/log.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace rr::setup {

namespace {

Status build(bootstrap::Rendezvous rv, const Settings& settings, bootstrap::Clock::time_point deadline,
             std::unique_ptr<Communicator>* out) {
  std::unique_ptr<transport::UcxTransport> transport;
  RR_RETURN_IF_ERROR(transport::UcxTransport::Create(rv.rank, rv.size, &transport));

  std::vector<bootstrap::Bytes> addresses;
  RR_RETURN_IF_ERROR(bootstrap::all_gather(rv, "ucx-address", transport->local_address(), deadline, &addresses));
  // The ring neighbours are connected now; anyone else on first use.
  std::vector<int> neighbours;
  if (rv.size > 1) {
    neighbours.push_back((rv.rank + 1) % rv.size);
    if (rv.size > 2) neighbours.push_back((rv.rank + rv.size - 1) % rv.size);
  }
  RR_RETURN_IF_ERROR(transport->connect(std::move(addresses), neighbours));
  for (int peer : neighbours) {
    RR_LOG(LogLevel::kInfo, "rank %d -> rank %d over %s", rv.rank, peer, transport->describe_path(peer).c_str());
  }

  auto comm = std::make_unique<Communicator>(rv.rank, rv.size, settings, std::move(transport), rv.server);
  RR_RETURN_IF_ERROR(comm->init());
  // Nobody leaves setup until everybody is connected, so a rank that returns
  // can rely on its peers existing, and the serving rank may drop its store.
  RR_RETURN_IF_ERROR(bootstrap::barrier(rv, "ready", deadline));
  *out = std::move(comm);
  return Status::Ok();
}

}  // namespace

Status unique_id(rrUniqueId* id) { return bootstrap::make_unique_id(id); }

Status from_unique_id(const void* how, int nranks, int rank, const rrConfig_t* config,
                      std::unique_ptr<Communicator>* out) {
  Settings settings;
  RR_RETURN_IF_ERROR(resolve_settings(config, &settings));
  const auto deadline = bootstrap::Clock::now() + std::chrono::milliseconds(settings.timeout_ms);
  bootstrap::Rendezvous rv;
  RR_RETURN_IF_ERROR(
      bootstrap::rendezvous_from_unique_id(*static_cast<const rrUniqueId*>(how), nranks, rank, deadline, &rv));
  return build(std::move(rv), settings, deadline, out);
}

Status from_url(const void* how, int nranks, int rank, const rrConfig_t* config,
                std::unique_ptr<Communicator>* out) {
  Settings settings;
  RR_RETURN_IF_ERROR(resolve_settings(config, &settings));
  const auto deadline = bootstrap::Clock::now() + std::chrono::milliseconds(settings.timeout_ms);
  bootstrap::Rendezvous rv;
  RR_RETURN_IF_ERROR(bootstrap::rendezvous_from_url(static_cast<const char*>(how), nranks, rank, deadline, &rv));
  return build(std::move(rv), settings, deadline, out);
}

}  // namespace rr::setup
