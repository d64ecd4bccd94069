#include "api/setup.hpp"

#include "bootstrap/rendezvous.hpp"
#include "common/log.hpp"
#include "topo/numa.hpp"
#include "transport/ucx/shm_sweep.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace rr::setup {

namespace {

constexpr const char* kAddressExchange = "ucx-address";
constexpr const char* kReadyBarrier = "ready";

// The steps of setup. `*heard` tells a failure of the exchanges (another
// rank's, or a timeout) from one of this rank's own; `*published` says
// whether this rank's address went out. The transport and communicator live
// in the caller's `*transport` and `*comm`, so that they outlast a failure
// until it is published: a rank whose transport is gone makes its peers'
// connections to it fail, and their failure must not come first.
Status connect_all(bootstrap::Rendezvous& rv, const Settings& settings, bootstrap::Clock::time_point deadline,
                   std::unique_ptr<transport::UcxTransport>* transport, std::unique_ptr<Communicator>* comm,
                   bool* heard, bool* published) {
  // Where this rank runs, for the ring's order within its host (algo/ring_order.hpp).
  std::string no_numa;
  const int numa = topo::numa_node_of_this_process(&no_numa);
  if (numa < 0) RR_LOG(LogLevel::kInfo, "rank %d: NUMA node unknown: %s", rv.rank, no_numa.c_str());
  RR_RETURN_IF_ERROR(transport::UcxTransport::Create(rv.rank, rv.size, transport, numa));
  transport::UcxTransport& ucx = **transport;

  std::vector<bootstrap::Bytes> addresses;
  *heard = true;
  *published = true;
  RR_RETURN_IF_ERROR(bootstrap::all_gather(rv, kAddressExchange, ucx.local_address(), deadline, &addresses));
  *heard = false;
  // The ring neighbours are connected now; anyone else on first use.
  std::vector<int> neighbours;
  if (rv.size > 1) {
    neighbours.push_back((rv.rank + 1) % rv.size);
    if (rv.size > 2) neighbours.push_back((rv.rank + rv.size - 1) % rv.size);
  }
  RR_RETURN_IF_ERROR(ucx.connect(std::move(addresses), neighbours));
  for (int peer : neighbours) {
    RR_LOG(LogLevel::kInfo, "rank %d -> rank %d over %s", rv.rank, peer, ucx.path(peer).text.c_str());
  }

  *comm = std::make_unique<Communicator>(rv.rank, rv.size, settings, std::move(*transport), rv.server);
  RR_RETURN_IF_ERROR((*comm)->init());
  // Nobody leaves setup until everybody is connected, so a rank that returns
  // can rely on its peers existing, and the serving rank may drop its store.
  *heard = true;
  RR_RETURN_IF_ERROR(bootstrap::barrier(rv, kReadyBarrier, deadline));
  return (*comm)->greet_neighbours(deadline);
}

Status build(bootstrap::Rendezvous rv, const Settings& settings, bootstrap::Clock::time_point deadline,
             std::unique_ptr<Communicator>* out) {
  std::unique_ptr<transport::UcxTransport> transport;
  std::unique_ptr<Communicator> comm;
  bool heard = false;
  bool published = false;
  Status s = connect_all(rv, settings, deadline, &transport, &comm, &heard, &published);
  if (s.ok()) {
    *out = std::move(comm);
    return s;
  }
  // A rank that fails alone (its /dev/shm, its descriptors, its memory)
  // tells the others, which would otherwise wait for it until the deadline;
  // the serving rank keeps the store up until every rank has heard.
  if (!heard) s = bootstrap::publish_failure(rv, kAddressExchange, published, kReadyBarrier, s, deadline);
  bootstrap::await_failure_heard(rv, deadline);
  return s;
}

// A failed setup may be a rank that was killed while it made its transport:
// what it left in shared memory is removed (transport/ucx/shm_sweep.hpp).
Status swept(Status s) {
  if (!s.ok()) (void)transport::remove_orphan_ucx_segments();
  return s;
}

}  // namespace

Status unique_id(rrUniqueId* id) { return bootstrap::make_unique_id(id); }

Status grown(const rrUniqueId& id, int nranks, int rank, const Settings& settings, std::unique_ptr<Communicator>* out) {
  const auto deadline = bootstrap::Clock::now() + std::chrono::milliseconds(settings.timeout_ms);
  bootstrap::Rendezvous rv;
  RR_RETURN_IF_ERROR(swept(bootstrap::rendezvous_from_unique_id(id, nranks, rank, deadline, &rv)));
  return swept(build(std::move(rv), settings, deadline, out));
}

Status from_unique_id(const void* how, int nranks, int rank, const rrConfig_t* config,
                      std::unique_ptr<Communicator>* out) {
  Settings settings;
  RR_RETURN_IF_ERROR(resolve_settings(config, &settings));
  return grown(*static_cast<const rrUniqueId*>(how), nranks, rank, settings, out);
}

Status from_url(const void* how, int nranks, int rank, const rrConfig_t* config,
                std::unique_ptr<Communicator>* out) {
  Settings settings;
  RR_RETURN_IF_ERROR(resolve_settings(config, &settings));
  const auto deadline = bootstrap::Clock::now() + std::chrono::milliseconds(settings.timeout_ms);
  bootstrap::Rendezvous rv;
  RR_RETURN_IF_ERROR(
      swept(bootstrap::rendezvous_from_url(static_cast<const char*>(how), nranks, rank, deadline, &rv)));
  return swept(build(std::move(rv), settings, deadline, out));
}

}  // namespace rr::setup
