#include "transport/ucx/ucx_transport.hpp"

#include "transport/ucx/shm_sweep.hpp"
#include "transport/ucx/ucx_log.hpp"

#include "common/log.hpp"
#include "common/process.hpp"
#include "common/resources.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace rr::transport {

namespace {

// Ranks whose identities match share a kernel (boot id) and a pid namespace:
// they reach each other through shared memory, and a pid names a process.
struct HostIdentity {
  uint8_t bytes[16] = {};
};

HostIdentity host_identity() {
  HostIdentity id;
  std::string text;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char line[64] = {};
    if (std::fgets(line, sizeof(line), f)) text = line;
    std::fclose(f);
  }
  char ns[64] = {};
  ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  if (n > 0) text += std::string(ns, static_cast<size_t>(n));
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  text += host;
  // Two FNV-1a hashes with different bases fill the 16 bytes.
  uint64_t h1 = 1469598103934665603ull, h2 = 1099511628211ull * 7919;
  for (unsigned char c : text) {
    h1 = (h1 ^ c) * 1099511628211ull;
    h2 = (h2 ^ c) * 1099511628211ull + 0x9e3779b97f4a7c15ull;
  }
  std::memcpy(id.bytes, &h1, 8);
  std::memcpy(id.bytes + 8, &h2, 8);
  return id;
}

// [host identity][pid][NUMA node], then UCX's worker address.
constexpr size_t kAddressHeader = sizeof(HostIdentity) + 2 * sizeof(int32_t);
constexpr auto kLivenessInterval = std::chrono::milliseconds(10);

// The source rank rides in the top 16 bits so a receive matches one sender;
// an any-source receive's mask leaves them out.
constexpr int kRankShift = kTagBits;
constexpr ucp_tag_t kFullMask = ~ucp_tag_t{0};
constexpr ucp_tag_t kAnySourceMask = kTagMask;

ucp_tag_t wire_tag(int src, uint64_t tag) {
  return (static_cast<ucp_tag_t>(src) << kRankShift) | (tag & kTagMask);
}

std::string ucx_error(const char* what, ucs_status_t status) {
  return std::string(what) + ": " + ucs_status_string(status);
}

// What UCX takes from the process (measured with UCX 1.13 on one host):
// its context and worker hold about 16 descriptors and each peer one more
// (the engine's pidfd of a same-host peer, or UCX's socket to another host);
// its shared-memory transport maps a receive FIFO and a first 4.1 MiB chunk
// of receive descriptors in /dev/shm per worker.
constexpr long kWorkerDescriptors = 16;
constexpr uint64_t kWorkerShmBytes = uint64_t{9} << 19;  // 4.5 MiB

// A failed UCX call, with what ran out when something did. UCX's status says
// "Input/output error", "No resources are available" or "Out of memory"
// where it means descriptors or /dev/shm; the first ERROR line it printed
// during the call (`logged`) names the cause, and so do the figures where
// they are still short now (ranks setting up at once on one host compete for
// /dev/shm, and a rank that failed may find room again once others failed).
Status ucx_failure(const std::string& what, ucs_status_t status, long descriptors_needed,
                   const ucx_log::FirstError& logged) {
  std::string text = what + ": " + ucs_status_string(status);
  if (!logged.text().empty()) text += " (UCX: " + logged.text() + ")";
  std::string shortage = shm_shortage(kWorkerShmBytes);
  if (shortage.empty()) shortage = descriptor_shortage(descriptors_needed);
  if (!shortage.empty()) text += " (" + shortage + ")";
  return SystemError(text);
}

}  // namespace

UcxTransport::UcxTransport(int rank, int size)
    : rank_(rank), size_(size), peers_(size), counters_(size) {
  for (int r = 0; r < size; ++r) {
    peers_[r].owner = this;
    peers_[r].rank = r;
  }
}

Status UcxTransport::Create(int rank, int size, std::unique_ptr<UcxTransport>* out, int numa_node) {
  if (size > (1 << (64 - kRankShift))) {
    return InvalidArgument("ucx transport: at most 65536 ranks, got " + std::to_string(size));
  }
  // Short of descriptors, UCX aborts the process inside ucp_init or
  // ucp_worker_create (an assertion, or "Fatal: failed to set active message
  // handler") as often as it returns an error: refuse before it starts.
  const long descriptors_needed = kWorkerDescriptors + (size - 1);
  const std::string descriptors_short = descriptor_shortage(descriptors_needed);
  if (!descriptors_short.empty()) return SystemError("ucx transport: " + descriptors_short);
  std::unique_ptr<UcxTransport> t(new UcxTransport(rank, size));
  ucx_log::install();

  // UCX's TCP lane moves messages in 8 KiB segments by default; its cost per
  // segment holds a ring on a 1 Gbit/s link to 0.65-0.69 x link rate, where
  // 512 KiB segments reach 0.95 (bench/RESULTS.md, "Shaped links, 2 to 16
  // hosts"). UCX reads transport settings from the environment when it opens an
  // interface (ucp_config_modify only reaches UCP's own), so the default goes
  // there; a value the user set wins (overwrite = 0).
  setenv("UCX_TCP_TX_SEG_SIZE", "512k", 0);
  setenv("UCX_TCP_RX_SEG_SIZE", "512k", 0);
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return SystemError(ucx_error("ucp_config_read", status));

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  // WAKEUP lets an idle rank sleep on the worker's event fd instead of spinning,
  // which is what keeps five ranks on two cores moving.
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = static_cast<size_t>(size);
  ucx_log::FirstError logged;
  status = ucp_init(&params, config, &t->context_);
  ucp_config_release(config);
  if (status != UCS_OK) return ucx_failure("ucp_init", status, 2 * descriptors_needed, logged);

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
  status = ucp_worker_create(t->context_, &wparams, &t->worker_);
  if (status != UCS_OK) return ucx_failure("ucp_worker_create", status, 2 * descriptors_needed, logged);

  status = ucp_worker_get_efd(t->worker_, &t->event_fd_);
  if (status != UCS_OK) t->event_fd_ = -1;  // fall back to yielding in wait_for_events

  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  status = ucp_worker_get_address(t->worker_, &address, &address_length);
  if (status != UCS_OK) return SystemError(ucx_error("ucp_worker_get_address", status));
  auto* bytes = reinterpret_cast<const uint8_t*>(address);
  HostIdentity host = host_identity();
  const int32_t pid = static_cast<int32_t>(getpid());
  const int32_t numa = numa_node;
  t->numa_node_ = numa_node;
  t->local_address_.resize(kAddressHeader + address_length);
  std::memcpy(t->local_address_.data(), host.bytes, sizeof(host.bytes));
  std::memcpy(t->local_address_.data() + sizeof(host.bytes), &pid, sizeof(pid));
  std::memcpy(t->local_address_.data() + sizeof(host.bytes) + sizeof(pid), &numa, sizeof(numa));
  std::memcpy(t->local_address_.data() + kAddressHeader, bytes, address_length);
  ucp_worker_release_address(t->worker_, address);

  *out = std::move(t);
  return Status::Ok();
}

Status UcxTransport::make_sibling(int rank, int size, std::unique_ptr<Transport>* out) const {
  std::unique_ptr<UcxTransport> sibling;
  RR_RETURN_IF_ERROR(Create(rank, size, &sibling, numa_node_));
  *out = std::move(sibling);
  return Status::Ok();
}

UcxTransport::~UcxTransport() {
  // The pidfds last: closing the endpoints still checks same-host peers'
  // liveness with them (a closed one read as a dead peer).
  struct ClosePidfds {
    std::vector<Peer>& peers;
    ~ClosePidfds() {
      for (Peer& p : peers) {
        if (p.pidfd >= 0) close(p.pidfd);
        p.pidfd = -1;
      }
    }
  } close_pidfds{peers_};
  if (abandon_at_close_) {
    // UCX 1.13 asserts (arbiter.c:36, in the CMA endpoint's cleanup) when
    // an endpoint to a peer that died or stopped is torn down with
    // transfers still queued, and aborts the process. After a loss (a peer
    // gone during a call, or this communicator failed or aborted: its
    // notices have left already) the endpoints, worker and context are
    // therefore left as they are until the process exits: nobody progresses
    // them again, their shared memory is already unlinked, and UCX's error
    // callbacks run only from a progress call.
    ucx_log::count_loss(-1);
    (void)remove_orphan_ucx_segments();  // what a dead peer left
    return;
  }
  // A peer that left between calls (its endpoint failed: it closed first)
  // is closed by force below, the others with a flush; nothing of theirs
  // was queued, since every call had ended.
  close_endpoints();
  for (const auto& registration : registrations_) ucp_mem_unmap(context_, registration.second);
  if (worker_) ucp_worker_destroy(worker_);
  if (context_) ucp_cleanup(context_);
  if (loss_noted_) ucx_log::count_loss(-1);
}

int UcxTransport::same_host_ranks() const {
  if (!connected_) return 1;
  int n = 0;
  for (int r = 0; r < size_; ++r) n += r == rank_ || peers_[r].same_host ? 1 : 0;
  return n;
}

void UcxTransport::note_loss() const {
  if (loss_noted_) return;
  loss_noted_ = true;
  ucx_log::count_loss(+1);
}

void UcxTransport::abandon_at_close() const {
  abandon_at_close_ = true;
  note_loss();
}

Status UcxTransport::connect(std::vector<std::vector<uint8_t>> addresses,
                             const std::vector<int>& eager_peers) {
  if (static_cast<int>(addresses.size()) != size_) {
    return InternalError("ucx transport: expected " + std::to_string(size_) + " addresses");
  }
  const HostIdentity mine = host_identity();
  std::vector<std::vector<uint8_t>> hosts;  // distinct identities, in rank order
  host_of_ranks_.assign(static_cast<size_t>(size_), 0);
  numa_of_ranks_.assign(static_cast<size_t>(size_), -1);
  for (int r = 0; r < size_; ++r) {
    const std::vector<uint8_t>& a = addresses[static_cast<size_t>(r)];
    if (a.size() <= kAddressHeader) {
      return RemoteError("ucx transport: rank " + std::to_string(r) + " published a malformed address");
    }
    const std::vector<uint8_t> identity(a.begin(), a.begin() + sizeof(mine.bytes));
    const auto known = std::find(hosts.begin(), hosts.end(), identity);
    host_of_ranks_[static_cast<size_t>(r)] = static_cast<int>(known - hosts.begin());
    if (known == hosts.end()) hosts.push_back(identity);
    Peer& p = peers_[r];
    p.same_host = std::memcmp(a.data(), mine.bytes, sizeof(mine.bytes)) == 0;
    std::memcpy(&p.pid, a.data() + sizeof(mine.bytes), sizeof(p.pid));
    int32_t numa = -1;
    std::memcpy(&numa, a.data() + sizeof(mine.bytes) + sizeof(p.pid), sizeof(numa));
    numa_of_ranks_[static_cast<size_t>(r)] = numa;
    p.address.assign(a.begin() + kAddressHeader, a.end());
    if (p.same_host && r != rank_) {
      // A pidfd notices death even while the dead rank is an unreaped zombie,
      // which kill(pid, 0) does not; it also lets wait_for_events wake on it.
      p.pidfd = static_cast<int>(syscall(SYS_pidfd_open, p.pid, 0));
    }
  }
  connected_ = true;
  if (event_fd_ >= 0) wait_fds_.push_back(pollfd{event_fd_, POLLIN, 0});
  for (int peer : eager_peers) {
    if (peers_[peer].pidfd >= 0) wait_fds_.push_back(pollfd{peers_[peer].pidfd, POLLIN, 0});
  }
  for (int peer : eager_peers) {
    ucp_ep_h ep = nullptr;
    RR_RETURN_IF_ERROR(endpoint(peer, &ep));
  }
  return Status::Ok();
}

Status UcxTransport::endpoint(int peer, ucp_ep_h* ep) {
  Peer& p = peers_[peer];
  if (p.failure != UCS_OK) {
    return RemoteError("rank " + std::to_string(peer) + " failed: " + ucs_status_string(p.failure));
  }
  if (p.ep) {
    *ep = p.ep;
    return Status::Ok();
  }
  if (!connected_) return InternalError("ucx transport: connect() was not called");
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(p.address.data());
  // Error mode PEER makes UCX 1.13 drop its shared-memory transports (they
  // only offer ep_check), which would send same-host traffic through TCP on
  // loopback at a fraction of the bandwidth. Same-host peers therefore use
  // mode NONE and are watched by pid (check_liveness); others use PEER.
  // But where UCX reaches a same-host peer without shared memory (UCX_TLS
  // leaves it out), mode NONE would leave a reset TCP connection to UCX's
  // reconnection, which trips its own assertions (tcp_cm.c): the first
  // same-host endpoint shows which, and the rest follow it.
  params.err_mode = p.same_host && same_host_shm_ ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxTransport::on_peer_error;
  params.err_handler.arg = &p;
  ucx_log::FirstError logged;
  ucs_status_t status = ucp_ep_create(worker_, &params, &p.ep);
  if (status != UCS_OK) {
    p.ep = nullptr;
    // A peer that has left, or cannot be reached, is the peer's failure
    // (RemoteError: the communicator then listens for its notice), not this host's.
    p.next_liveness_check = {};
    Status alive = peer_status(peer);
    // A same-host peer's shared memory that cannot be reached is, almost
    // always, a peer on its way out (it exits the moment it failed, and its
    // segments go before its pid does): give its pid a moment to say so.
    if (alive.ok() && p.same_host && status == UCS_ERR_SHMEM_SEGMENT && p.pidfd >= 0) {
      pollfd pfd{p.pidfd, POLLIN, 0};
      if (poll(&pfd, 1, 200) > 0) mark_dead(p);
      alive = peer_status(peer);
    }
    if (!alive.ok()) return RemoteError("cannot connect to rank " + std::to_string(peer) + ": " + alive.message());
    if (status == UCS_ERR_ENDPOINT_TIMEOUT || status == UCS_ERR_UNREACHABLE) {
      // The peer's failure from now on, as an endpoint error would be: its
      // peer_status() says so, so that waits on it end and sends to the
      // other peers go on (exec::Batch::post_past_lost_peers).
      on_peer_error(&p, nullptr, status);
      return RemoteError("cannot connect to rank " + std::to_string(peer) + ": " + ucs_status_string(status));
    }
    return ucx_failure("cannot connect to rank " + std::to_string(peer), status, 2, logged);
  }
  if (p.same_host && same_host_shm_ && !same_host_checked_) {
    same_host_checked_ = true;
    const Path lanes = path(peer);
    if (!lanes.shared_memory) {
      same_host_shm_ = false;  // no shared-memory lane: mode PEER, as between hosts
      RR_LOG(LogLevel::kInfo, "rank %d: same-host rank %d is reached without shared memory (%s): error mode PEER",
             rank_, peer, lanes.text.c_str());
      ucp_request_param_t close{};
      close.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      close.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t request = ucp_ep_close_nbx(p.ep, &close);
      while (request && !UCS_PTR_IS_ERR(request) && ucp_request_check_status(request) == UCS_INPROGRESS) {
        ucp_worker_progress(worker_);
      }
      if (request && !UCS_PTR_IS_ERR(request)) ucp_request_free(request);
      p.ep = nullptr;
      return endpoint(peer, ep);
    }
  }
  *ep = p.ep;
  return Status::Ok();
}

void UcxTransport::on_peer_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* p = static_cast<Peer*>(arg);
  p->failure = status;
  // A peer that closed its endpoints with nothing of ours on the way to it
  // (it destroyed its communicator first, while this rank was still ending
  // the last call: its sends had all arrived) left in order, as between
  // calls: the endpoint is torn down as such. Taken for a failure, it left
  // the whole UCX context behind at every such destroy
  // (tests/integration/comm_churn_test.cpp). A call that needed it fails,
  // and that failure leaves the transport as it is (expect_peer_loss).
  if (p->owner->between_calls_ || (p->sends_in_flight == 0 && p->flushing == 0)) {
    p->owner->note_loss();
  } else {
    p->owner->abandon_at_close();
  }
}

void UcxTransport::close_endpoints() {
  // Flush what is queued so the last messages reach live peers; a dead or
  // stuck peer must not hold us here, so the flush has a deadline and what
  // remains is forced closed.
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + close_timeout_;
  std::vector<void*> pending;
  for (Peer& p : peers_) {
    if (!p.ep) continue;
    check_liveness(p);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = p.failure != UCS_OK ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t request = ucp_ep_close_nbx(p.ep, &param);
    if (request && !UCS_PTR_IS_ERR(request)) pending.push_back(request);
    p.ep = nullptr;
  }
  while (!pending.empty() && Clock::now() < deadline) {
    ucp_worker_progress(worker_);
    for (auto it = pending.begin(); it != pending.end();) {
      if (ucp_request_check_status(*it) != UCS_INPROGRESS) {
        ucp_request_free(*it);
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Closes that could not finish are released to UCX, which completes them
  // as the worker is destroyed.
  for (void* request : pending) ucp_request_free(request);
}

Status UcxTransport::register_memory(void* ptr, size_t bytes) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = ptr;
  params.length = bytes;
  ucp_mem_h memh = nullptr;
  ucs_status_t status = ucp_mem_map(context_, &params, &memh);
  if (status != UCS_OK) return SystemError(ucx_error("ucp_mem_map of the staging pool", status));
  registrations_.emplace_back(ptr, memh);
  return Status::Ok();
}

void UcxTransport::deregister_memory(void* ptr) {
  for (auto it = registrations_.begin(); it != registrations_.end(); ++it) {
    if (it->first == ptr) {
      ucp_mem_unmap(context_, it->second);
      registrations_.erase(it);
      return;
    }
  }
}

Transport::Path UcxTransport::path(int peer) const {
  Path path;
  const Peer& p = peers_[peer];
  if (!p.ep) {
    path.text = "not connected";
    return path;
  }
  // UCX 1.13 has no structured query of an endpoint's transports; its
  // printout names each lane as "lane[i]: ... tl/dev ...". This is the one
  // place that reads it.
  char* text = nullptr;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (!stream) {
    path.text = "unknown";
    return path;
  }
  ucp_ep_print_info(p.ep, stream);
  std::fclose(stream);
  std::string all(text, length);
  std::free(text);
  size_t pos = 0;
  while ((pos = all.find("lane[", pos)) != std::string::npos) {
    size_t eol = all.find('\n', pos);
    std::string line = all.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    // Shared-memory transports are UCX's "memory" devices (posix, sysv,
    // cma, xpmem, knem); TCP's are "tcp/<interface>".
    path.shared_memory |= line.find("/memory") != std::string::npos;
    path.tcp |= line.find("tcp/") != std::string::npos;
    if (!path.text.empty()) path.text += "; ";
    path.text += line;
    pos = eol == std::string::npos ? all.size() : eol;
  }
  if (path.text.empty()) path.text = "unknown";
  return path;
}

void UcxTransport::on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* done = static_cast<Completion*>(user_data);
  --static_cast<UcxTransport*>(done->owner)->peers_[done->peer].sends_in_flight;
  done->failed = status != UCS_OK;
  done->error = status;
  done->handle = nullptr;
  done->done = true;
  ucp_request_free(request);
}

void UcxTransport::on_flush_done(void* request, ucs_status_t /*status*/, void* user_data) {
  --static_cast<Peer*>(user_data)->flushing;  // failed or not, it is over
  ucp_request_free(request);
}

void UcxTransport::begin_flush() {
  flushing_.erase(std::remove_if(flushing_.begin(), flushing_.end(), [&](int peer) { return peers_[peer].flushing == 0; }),
                  flushing_.end());
  for (int peer : unflushed_) {
    Peer& p = peers_[peer];
    p.unflushed = false;
    if (!p.ep || p.failure != UCS_OK) continue;  // closed, or past reaching
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &UcxTransport::on_flush_done;
    param.user_data = &p;
    ++p.flushing;  // before the call, in case UCX completes it inside
    ucs_status_ptr_t request = ucp_ep_flush_nbx(p.ep, &param);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) {
      --p.flushing;  // nothing was held, or it cannot be flushed
      continue;
    }
    if (std::find(flushing_.begin(), flushing_.end(), peer) == flushing_.end()) flushing_.push_back(peer);
  }
  unflushed_.clear();
}

int UcxTransport::flush_waiting_for() const {
  for (int peer : flushing_) {
    if (peers_[peer].flushing > 0) return peer;
  }
  return -1;
}

void UcxTransport::on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                                void* user_data) {
  auto* done = static_cast<Completion*>(user_data);
  auto* self = static_cast<UcxTransport*>(done->owner);
  // A matched message names its sender in its tag (also when it was too
  // long for the buffer); a canceled receive has none.
  const bool matched = status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED;
  if (done->peer == kAnySource && matched && info) {
    const ucp_tag_t sender = info->sender_tag >> kRankShift;
    if (sender < static_cast<ucp_tag_t>(self->size_)) done->peer = static_cast<int>(sender);
  }
  done->failed = status != UCS_OK;
  done->error = status;
  done->bytes = status == UCS_OK ? info->length : 0;
  done->handle = nullptr;
  done->done = true;
  if (done->peer >= 0) self->counters_[done->peer].received += done->bytes;
  ucp_request_free(request);
}

Status UcxTransport::post_send(int peer, uint64_t tag, const void* buf, size_t bytes,
                               Completion* done) {
  ucp_ep_h ep = nullptr;
  RR_RETURN_IF_ERROR(endpoint(peer, &ep));
  done->reset();
  done->peer = peer;
  done->owner = this;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param.cb.send = &UcxTransport::on_send_done;
  param.user_data = done;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  ++peers_[peer].sends_in_flight;  // before the call: its callback may run inside it
  ucs_status_ptr_t request = ucp_tag_send_nbx(ep, buf, bytes, wire_tag(rank_, tag), &param);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) --peers_[peer].sends_in_flight;  // no callback comes
  if (UCS_PTR_IS_ERR(request)) {
    ucs_status_t status = UCS_PTR_STATUS(request);
    return RemoteError("send of " + std::to_string(bytes) + " bytes to rank " + std::to_string(peer) +
                       " failed: " + ucs_status_string(status));
  }
  counters_[peer].sent += bytes;
  if (!peers_[peer].unflushed) {
    peers_[peer].unflushed = true;
    unflushed_.push_back(peer);
  }
  if (request == nullptr) {
    done->done = true;
  } else if (!done->done) {
    done->handle = request;
  }
  return Status::Ok();
}

Status UcxTransport::post_recv(int peer, uint64_t tag, void* buf, size_t bytes, Completion* done) {
  done->reset();
  done->peer = peer;
  done->owner = this;
  // Immediate completion is refused: UCX 1.13 does not report the length of
  // an immediately completed receive reliably, and the callback always does.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = &UcxTransport::on_recv_done;
  param.user_data = done;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  const bool any = peer == kAnySource;
  ucs_status_ptr_t request = ucp_tag_recv_nbx(worker_, buf, bytes, any ? (tag & kTagMask) : wire_tag(peer, tag),
                                              any ? kAnySourceMask : kFullMask, &param);
  if (UCS_PTR_IS_ERR(request)) {
    ucs_status_t status = UCS_PTR_STATUS(request);
    return SystemError("receive of " + std::to_string(bytes) + " bytes from " +
                       (any ? std::string("any rank") : "rank " + std::to_string(peer)) +
                       " failed: " + ucs_status_string(status));
  }
  // With NO_IMM_CMPL, UCX may already have run the callback (and freed the
  // request) for a message that was waiting unexpected.
  if (!done->done) done->handle = request;
  return Status::Ok();
}

void UcxTransport::cancel_posted(Completion* pending) {
  if (!pending->done && pending->handle) ucp_request_cancel(worker_, pending->handle);
}

bool UcxTransport::progress_posted() { return ucp_worker_progress(worker_) != 0; }

void UcxTransport::wait_for_events(int timeout_ms) {
  switch (arm_events()) {
    case Arm::kBusy:
      return;  // events are already waiting
    case Arm::kNoEvents:
      sched_yield();
      return;
    case Arm::kArmed:
      (void)poll(wait_fds_.data(), wait_fds_.size(), timeout_ms);
      return;
  }
}

Transport::Arm UcxTransport::arm_events() {
  if (event_fd_ < 0) return Arm::kNoEvents;
  const ucs_status_t status = ucp_worker_arm(worker_);
  if (status == UCS_OK) return Arm::kArmed;
  return status == UCS_ERR_BUSY ? Arm::kBusy : Arm::kNoEvents;
}

void UcxTransport::mark_dead(Peer& p) const {
  p.failure = UCS_ERR_CONNECTION_RESET;
  abandon_at_close();
  // A rank killed between creating a shared-memory segment and unlinking
  // it leaves the segment behind; it has released it by now.
  (void)remove_orphan_ucx_segments();
}

void UcxTransport::check_liveness(Peer& p) const {
  if (!p.same_host || p.failure != UCS_OK || p.rank == rank_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < p.next_liveness_check) return;
  p.next_liveness_check = now + kLivenessInterval;
  if (p.pidfd >= 0) {
    pollfd pfd{p.pidfd, POLLIN, 0};
    if (poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN) != 0) mark_dead(p);
    return;
  }
  // No pidfd (kernel before 5.3): the process is gone, or a zombie.
  if (process_ended(p.pid)) mark_dead(p);
}

Status UcxTransport::peer_status(int peer) const {
  Peer& p = const_cast<Peer&>(peers_[peer]);
  check_liveness(p);
  if (p.failure == UCS_OK) return Status::Ok();
  return RemoteError("rank " + std::to_string(peer) + " failed or disconnected (" +
                     ucs_status_string(p.failure) + ")");
}

void UcxTransport::check_peers_now() {
  for (Peer& p : peers_) {
    p.next_liveness_check = {};
    check_liveness(p);
  }
}

std::string UcxTransport::describe_posted_error(const Completion& c) const {
  return ucs_status_string(static_cast<ucs_status_t>(c.error));
}

}  // namespace rr::transport
