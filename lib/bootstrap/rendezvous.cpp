#include "bootstrap/rendezvous.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "bootstrap/file_store.hpp"
#include "bootstrap/launcher.hpp"
#include "bootstrap/tcp_store.hpp"
#include "bootstrap/torch_store.hpp"
#include "bootstrap/unique_id.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

namespace rr::bootstrap {

namespace {

constexpr const char* kAuthTokenVariable = "RR_AUTH_TOKEN";

// Servers this process started, kept so a second communicator made with the
// same env:// address, or the rank-0 process of a unique id, finds them.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::shared_ptr<TcpStoreServer>>& server_registry() {
  static auto* servers = new std::map<std::string, std::shared_ptr<TcpStoreServer>>();
  return *servers;
}
// Registry keys carry the pid: a child forked after its parent started a
// server inherits the registry but not the server's thread, and must not
// adopt it.
std::string registry_key(const std::string& name) { return std::to_string(getpid()) + "/" + name; }

// How many communicators this process made with each init method: every rank
// makes them in the same order, so the count names the communicator's keys.
std::map<std::string, int>& generation_registry() {
  static auto* generations = new std::map<std::string, int>();
  return *generations;
}

// Counted per rank too: threads of one process may be different ranks.
std::string next_prefix(const std::string& method, int rank) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return "c" + std::to_string(generation_registry()[method + " rank " + std::to_string(rank)]++) + "/";
}

// Rank and size not given as arguments come from the launcher's variables.
Status parse_rank_size(int nranks, int rank, const LaunchInfo& launch, Rendezvous* rv) {
  if (nranks < 0) {
    if (launch.size < 0) {
      return InvalidArgument("nranks not given and no launcher variables found (WORLD_SIZE, OMPI_COMM_WORLD_SIZE, "
                             "PMI_SIZE or SLURM_NTASKS)");
    }
    nranks = launch.size;
  }
  if (rank < 0) {
    if (launch.rank < 0) {
      return InvalidArgument("rank not given and no launcher variables found (RANK, OMPI_COMM_WORLD_RANK, "
                             "PMI_RANK or SLURM_PROCID)");
    }
    rank = launch.rank;
  }
  if (nranks <= 0) return InvalidArgument("nranks=" + std::to_string(nranks) + ": must be >= 1");
  if (rank >= nranks) {
    return InvalidArgument("rank=" + std::to_string(rank) + " out of range for nranks=" + std::to_string(nranks));
  }
  rv->rank = rank;
  rv->size = nranks;
  return Status::Ok();
}

Status parse_host_port(const std::string& text, const std::string& what, std::string* host, uint16_t* port) {
  std::string h;
  std::string p;
  if (!text.empty() && text[0] == '[') {  // [v6]:port
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return InvalidArgument(what + " '" + text + "': expected [address]:port");
    }
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) return InvalidArgument(what + " '" + text + "': expected host:port");
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  char* end = nullptr;
  long v = std::strtol(p.c_str(), &end, 10);
  if (h.empty() || p.empty() || *end != '\0' || v <= 0 || v > 65535) {
    return InvalidArgument(what + " '" + text + "': expected host:port with port 1..65535");
  }
  *host = h;
  *port = static_cast<uint16_t>(v);
  return Status::Ok();
}

// Fills `out` from the kernel's random source (getrandom, or /dev/urandom
// where the kernel predates it).
Status fill_random(uint8_t* out, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = getrandom(out + done, size - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != ENOSYS) return SystemError("getrandom for the unique id's secret: " + errno_text(errno));
    break;
  }
  if (done == size) return Status::Ok();
  UniqueFd urandom(open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!urandom.valid()) return SystemError("open /dev/urandom for the unique id's secret: " + errno_text(errno));
  while (done < size) {
    const ssize_t n = read(urandom.get(), out + done, size - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      return SystemError("read /dev/urandom for the unique id's secret: " + (n == 0 ? std::string("end of file") : errno_text(errno)));
    }
  }
  return Status::Ok();
}

// The secret of an env:// or tcp:// job: RR_AUTH_TOKEN as it is (empty when
// unset, which tcp_rendezvous allows on loopback only).
Status secret_from_env(StoreSecret* out) {
  StoreSecret secret;
  secret.name = kAuthTokenVariable;
  if (const char* token = env_str(kAuthTokenVariable)) {
    secret.bytes.assign(token, token + std::strlen(token));
    if (secret.bytes.size() > tcp_store::kMaxSecretBytes) {
      return InvalidArgument(std::string(kAuthTokenVariable) + " is " + std::to_string(secret.bytes.size()) +
                             " bytes long: at most " + std::to_string(tcp_store::kMaxSecretBytes));
    }
  } else {
    secret.name += " (unset on this rank)";
  }
  *out = std::move(secret);
  return Status::Ok();
}

// A store that other hosts can reach must not serve whoever connects: the
// keys carry every rank's transport address. Refuses, naming RR_AUTH_TOKEN,
// when no secret is set and the store listens (rank 0) or sits (every rank)
// on an address that is not loopback.
Status require_secret_off_loopback(const std::string& method, const Rendezvous& rv, const StoreSecret& secret,
                                   const std::string& host, const char* bind) {
  if (!secret.bytes.empty()) return Status::Ok();
  std::string exposed;
  if (rv.rank == 0 && bind && !is_loopback_host(bind, /*passive=*/true)) {
    exposed = "would listen on " + std::string(bind) + " (RR_BIND_ADDR)";
  } else if (rv.rank == 0 && !bind && !is_loopback_host(host, /*passive=*/true)) {
    exposed = "would listen on " + host;
  } else if (!is_loopback_host(host, /*passive=*/false)) {
    exposed = "is at " + host;
  }
  if (exposed.empty()) return Status::Ok();
  return InvalidArgument(method + ": rank " + std::to_string(rv.rank) + ": the rendezvous " + exposed +
                         ", which is not a loopback address, and " + kAuthTokenVariable +
                         " is not set: set it to the same secret on every rank (any string; rr-run "
                         "sets one for its ranks)");
}

// Whether torchrun's agent serves a torch store at host:port: it exports
// TORCHELASTIC_USE_AGENT_STORE=True beside its own MASTER_ADDR and
// MASTER_PORT (torch's rendezvous applies the same test).
bool agent_store_serves(const std::string& host, uint16_t port) {
  const char* flag = env_str("TORCHELASTIC_USE_AGENT_STORE");
  const char* addr = env_str("MASTER_ADDR");
  const char* port_text = env_str("MASTER_PORT");
  if (!flag || std::strcmp(flag, "True") != 0 || !addr || !port_text) return false;
  std::string a = addr;
  if (a.size() > 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  return a == host && port_text == std::to_string(port);
}

// Every rank, rank 0 included, is a client of the agent's store. The keys
// live under ringreduce/<restart>/: the agent's store outlives the workers
// it restarts (TORCHELASTIC_RESTART_COUNT), and torch's own keys share it.
Status agent_store_rendezvous(const std::string& method, const std::string& host, uint16_t port,
                              Clock::time_point deadline, Rendezvous* rv) {
  std::unique_ptr<TorchStore> client;
  Status s = TorchStore::Connect(host, port, deadline, &client);
  if (!s.ok()) return Status(s.code(), method + ": rank " + std::to_string(rv->rank) + ": " + s.message());
  const char* restart = env_str("TORCHELASTIC_RESTART_COUNT");
  rv->store = std::move(client);
  rv->method = method + " (torchrun's agent store)";
  rv->prefix = "ringreduce/" + std::string(restart ? restart : "0") + "/" + next_prefix(method, rv->rank);
  return Status::Ok();
}

// Rank 0 serves the store at host:port (reusing a server this process
// already runs there); every rank, rank 0 included, connects as a client.
// Under torchrun, whose agent serves a torch store there, every rank is a
// client of that one instead.
Status tcp_rendezvous(const std::string& method, const std::string& host, uint16_t port,
                      Clock::time_point deadline, Rendezvous* rv) {
  if (agent_store_serves(host, port)) return agent_store_rendezvous(method, host, port, deadline, rv);
  StoreSecret secret;
  RR_RETURN_IF_ERROR(secret_from_env(&secret));
  const char* bind = env_str("RR_BIND_ADDR");
  RR_RETURN_IF_ERROR(require_secret_off_loopback(method, *rv, secret, host, bind));
  if (rv->rank == 0) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    const std::string key = registry_key(host + ":" + std::to_string(port));
    auto& server = server_registry()[key];
    if (!server) {
      std::unique_ptr<TcpStoreServer> started;
      Status s = TcpStoreServer::Start(bind ? bind : host, port, secret.bytes, &started);
      if (!s.ok()) {
        server_registry().erase(key);
        return Status(s.code(), method + ": rank 0 cannot serve the rendezvous: " + s.message());
      }
      server = std::move(started);
    }
    rv->server = server;
  }
  std::unique_ptr<TcpStore> client;
  Status s = TcpStore::Connect(host, port, secret, deadline, &client);
  if (s.code() == Code::kInvalidArgument) {
    return Status(s.code(), method + ": rank " + std::to_string(rv->rank) + ": " + s.message() +
                                "; every rank of a job needs the same " + kAuthTokenVariable);
  }
  if (!s.ok()) {
    return Status(s.code(), method + ": rank " + std::to_string(rv->rank) + " cannot reach the rendezvous: " +
                                s.message());
  }
  rv->store = std::move(client);
  rv->method = method;
  rv->prefix = next_prefix(method, rv->rank);
  return Status::Ok();
}

// The address other hosts reach this one at: RR_BOOTSTRAP_HOST, else the
// first IPv4 address of an interface that is up and not loopback (or
// RR_SOCKET_IFNAME's), else loopback.
std::string advertised_host() {
  if (const char* h = env_str("RR_BOOTSTRAP_HOST")) return h;
  const char* want_if = env_str("RR_SOCKET_IFNAME");
  std::string found = "127.0.0.1";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
    if (want_if ? std::strcmp(a->ifa_name, want_if) != 0 : (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    found = text;
    break;
  }
  freeifaddrs(list);
  return found;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) out += digits[p[i] >> 4], out += digits[p[i] & 15];
  return out;
}

}  // namespace

Status rendezvous_from_url(const std::string& url, int nranks, int rank, Clock::time_point deadline,
                           Rendezvous* out) {
  Rendezvous rv;
  LaunchInfo launch;
  RR_RETURN_IF_ERROR(detect_launcher(&launch));
  if (url == "env://" || url.rfind("env://", 0) == 0) {
    RR_RETURN_IF_ERROR(parse_rank_size(nranks, rank, launch, &rv));
    const char* addr = env_str("MASTER_ADDR");
    const char* port = env_str("MASTER_PORT");
    // A launcher that put every rank on this host needs no MASTER_ADDR, and
    // one with a job id needs no MASTER_PORT: every rank derives the same.
    const std::string derived_port = launch.job_id.empty() ? "" : std::to_string(default_master_port(launch.job_id));
    if (!addr && launch.single_host) addr = "127.0.0.1";
    if (!port && !derived_port.empty()) port = derived_port.c_str();
    if (!addr) {
      return InvalidArgument("env://: MASTER_ADDR is not set" +
                             (launch.launcher.empty() ? std::string() : " (launched by " + launch.launcher +
                                                                            " across several hosts: set it to rank 0's host)"));
    }
    if (!port) return InvalidArgument("env://: MASTER_PORT is not set");
    if (!launch.launcher.empty()) {
      RR_LOG(LogLevel::kInfo, "env://: launched by %s, rank %d of %d, rendezvous %s:%s", launch.launcher.c_str(),
             rv.rank, rv.size, addr, port);
    }
    std::string host;
    uint16_t p = 0;
    RR_RETURN_IF_ERROR(parse_host_port(std::string(addr).find(':') != std::string::npos
                                           ? "[" + std::string(addr) + "]:" + port
                                           : std::string(addr) + ":" + port,
                                       "env:// MASTER_ADDR:MASTER_PORT", &host, &p));
    RR_RETURN_IF_ERROR(tcp_rendezvous("env://" + host + ":" + std::to_string(p), host, p, deadline, &rv));
  } else if (url.rfind("tcp://", 0) == 0) {
    RR_RETURN_IF_ERROR(parse_rank_size(nranks, rank, launch, &rv));
    std::string host;
    uint16_t p = 0;
    RR_RETURN_IF_ERROR(parse_host_port(url.substr(6), "init url", &host, &p));
    RR_RETURN_IF_ERROR(tcp_rendezvous(url, host, p, deadline, &rv));
  } else if (url.rfind("file://", 0) == 0) {
    RR_RETURN_IF_ERROR(parse_rank_size(nranks, rank, launch, &rv));
    const std::string path = url.substr(7);
    if (path.empty() || path[0] != '/') return InvalidArgument("init url '" + url + "': expected file:///absolute/path");
    std::unique_ptr<FileStore> store;
    RR_RETURN_IF_ERROR(FileStore::Open(path, &store));
    rv.store = std::move(store);
    rv.method = url;
    rv.prefix = next_prefix(url, rv.rank);
  } else {
    return InvalidArgument("init url '" + url + "': expected env://, tcp://host:port or file:///path");
  }
  *out = std::move(rv);
  return Status::Ok();
}

Status make_unique_id(rrUniqueId* id) {
  UniqueIdWire wire{};
  std::memcpy(wire.magic, kUniqueIdMagic, sizeof(kUniqueIdMagic));
  RR_RETURN_IF_ERROR(fill_random(wire.secret, sizeof(wire.secret)));
  const std::string host = advertised_host();
  if (host.size() >= sizeof(wire.host)) return InvalidArgument("RR_BOOTSTRAP_HOST is too long: " + host);
  std::memcpy(wire.host, host.c_str(), host.size());

  // The id's secret guards the store wherever it listens; RR_AUTH_TOKEN plays
  // no part.
  std::unique_ptr<TcpStoreServer> server;
  const char* bind = env_str("RR_BIND_ADDR");
  RR_RETURN_IF_ERROR(
      TcpStoreServer::Start(bind ? bind : host, 0, Bytes(wire.secret, wire.secret + sizeof(wire.secret)), &server));
  wire.port = server->port();
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    server_registry()[registry_key("id:" + hex(wire.secret, sizeof(wire.secret)))] = std::move(server);
  }
  rrUniqueId result{};
  std::memcpy(result.internal, &wire, sizeof(wire));
  *id = result;
  RR_LOG(LogLevel::kInfo, "unique id: rendezvous at %s:%u", host.c_str(), static_cast<unsigned>(wire.port));
  return Status::Ok();
}

Status rendezvous_from_unique_id(const rrUniqueId& id, int nranks, int rank, Clock::time_point deadline,
                                 Rendezvous* out) {
  UniqueIdWire wire;
  std::memcpy(&wire, id.internal, sizeof(wire));
  if (std::memcmp(wire.magic, kUniqueIdMagic, sizeof(kUniqueIdMagic)) != 0 || wire.host[sizeof(wire.host) - 1] != '\0') {
    return InvalidArgument("comm_id: not made by rrGetUniqueId");
  }
  if (nranks <= 0) return InvalidArgument("nranks=" + std::to_string(nranks) + ": must be >= 1");
  if (rank < 0 || rank >= nranks) {
    return InvalidArgument("rank=" + std::to_string(rank) + " out of range for nranks=" + std::to_string(nranks));
  }
  Rendezvous rv;
  rv.rank = rank;
  rv.size = nranks;
  const std::string secret = hex(wire.secret, sizeof(wire.secret));
  {
    // The process that made the id holds its server; the first communicator
    // made with the id in that process takes it over, and it lives as long.
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = server_registry().find(registry_key("id:" + secret));
    if (it != server_registry().end()) {
      rv.server = std::move(it->second);
      server_registry().erase(it);
    }
  }
  std::unique_ptr<TcpStore> client;
  const std::string where = std::string(wire.host) + ":" + std::to_string(wire.port);
  const StoreSecret id_secret{Bytes(wire.secret, wire.secret + sizeof(wire.secret)), "unique id's secret"};
  Status s = TcpStore::Connect(wire.host, wire.port, id_secret, deadline, &client);
  if (s.code() == Code::kInvalidArgument) {
    return Status(s.code(), "unique id: rank " + std::to_string(rank) + ": " + s.message() +
                                "; the id is not the one that rendezvous was made for");
  }
  if (!s.ok()) {
    return Status(s.code(), "unique id: rank " + std::to_string(rank) + " cannot reach the rendezvous at " +
                                where + ": " + s.message());
  }
  rv.store = std::move(client);
  rv.method = "unique id at " + where;
  // Keys appear in error text (a timed-out get names its key): they carry 4
  // of the secret's 32 bytes, never the whole of it.
  rv.prefix = "id/" + secret.substr(0, 8) + "/";
  *out = std::move(rv);
  return Status::Ok();
}

namespace {
// A record whose world size reads 0 is a failure (no world has 0 ranks), and
// a barrier that opens with this byte failed: what follows says why.
constexpr uint32_t kFailureRecord = 0;
constexpr uint8_t kBarrierFailed = 0xff;
constexpr const char* kFailureHeardKey = "setup-failure/heard";
constexpr const char* kFailureCountKey = "setup-failure/count";

// The failure a barrier's value carries ([kBarrierFailed][i32 rank][text],
// publish_failure), as this rank reports it; Ok for an open barrier.
Status barrier_failure(const Rendezvous& rv, const Bytes& open) {
  if (open.size() <= 1 || open[0] != kBarrierFailed) return Status::Ok();
  int32_t failed = -1;
  if (open.size() >= 5) std::memcpy(&failed, open.data() + 1, 4);
  const std::string text(open.begin() + std::min<size_t>(5, open.size()), open.end());
  return RemoteError(rv.method + ": rank " + std::to_string(failed) + " failed to set up: " + text);
}
}  // namespace

Status all_gather(Rendezvous& rv, const std::string& name, const Bytes& mine, Clock::time_point deadline,
                  std::vector<Bytes>* all) {
  // A rank number taken twice would silently cross two processes' traffic.
  int64_t claims = 0;
  RR_RETURN_IF_ERROR(rv.store->add(rv.key("rank/" + std::to_string(rv.rank)), 1, deadline, &claims));
  if (claims != 1) {
    return InvalidArgument(rv.method + ": rank " + std::to_string(rv.rank) +
                           " was claimed by more than one process (check RANK)");
  }
  // Record: [u32 world size][payload]; a world size of 0 marks a failure
  // record (publish_failure), whose payload is the failing rank's text.
  Bytes record(4 + mine.size());
  const uint32_t size = static_cast<uint32_t>(rv.size);
  std::memcpy(record.data(), &size, 4);
  std::memcpy(record.data() + 4, mine.data(), mine.size());
  RR_RETURN_IF_ERROR(rv.store->set(rv.key(name + "/" + std::to_string(rv.rank)), record));

  std::vector<Bytes> result(static_cast<size_t>(rv.size));
  for (int peer = 0; peer < rv.size; ++peer) {
    Bytes theirs;
    if (peer == rv.rank) {
      theirs = record;
    } else {
      Status s = rv.store->get(rv.key(name + "/" + std::to_string(peer)), deadline, &theirs);
      if (s.code() == Code::kTimeout) {
        return Timeout(rv.method + ": rank " + std::to_string(rv.rank) + " waited for rank " +
                       std::to_string(peer) + " to join, which never arrived (" + s.message() + ")");
      }
      RR_RETURN_IF_ERROR(s);
    }
    if (theirs.size() < 4) return RemoteError(rv.method + ": malformed record from rank " + std::to_string(peer));
    uint32_t their_size = 0;
    std::memcpy(&their_size, theirs.data(), 4);
    if (their_size == kFailureRecord) {
      return RemoteError(rv.method + ": rank " + std::to_string(peer) + " failed to set up: " +
                         std::string(theirs.begin() + 4, theirs.end()));
    }
    if (their_size != size) {
      return InvalidArgument(rv.method + ": rank " + std::to_string(peer) + " says the world size is " +
                             std::to_string(their_size) + ", rank " + std::to_string(rv.rank) + " says " +
                             std::to_string(size));
    }
    result[static_cast<size_t>(peer)].assign(theirs.begin() + 4, theirs.end());
  }
  *all = std::move(result);
  return Status::Ok();
}

Status barrier(Rendezvous& rv, const std::string& name, Clock::time_point deadline) {
  int64_t arrived = 0;
  RR_RETURN_IF_ERROR(rv.store->add(rv.key(name + "/arrived"), 1, deadline, &arrived));
  if (arrived == rv.size) RR_RETURN_IF_ERROR(rv.store->set(rv.key(name + "/open"), Bytes{1}));
  Bytes open;
  Status s = rv.store->get(rv.key(name + "/open"), deadline, &open);
  if (s.code() == Code::kTimeout) {
    return Timeout(rv.method + ": rank " + std::to_string(rv.rank) + " waited at barrier '" + name +
                   "' for ranks that never arrived");
  }
  RR_RETURN_IF_ERROR(s);
  RR_RETURN_IF_ERROR(barrier_failure(rv, open));
  // Second phase: count the ranks that have left, so the serving rank knows
  // when no one needs its store any more.
  int64_t left = 0;
  RR_RETURN_IF_ERROR(rv.store->add(rv.key(name + "/left"), 1, deadline, &left));
  if (rv.server) {
    while (left < rv.size) {
      if (Clock::now() > deadline) {
        return Timeout(rv.method + ": rank " + std::to_string(rv.rank) + " waited for every rank to leave barrier '" +
                       name + "'");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      RR_RETURN_IF_ERROR(rv.store->add(rv.key(name + "/left"), 0, deadline, &left));
    }
  }
  return Status::Ok();
}

Status publish_failure(Rendezvous& rv, const std::string& gather_name, bool record_published,
                       const std::string& barrier_name, const Status& failure, Clock::time_point deadline) {
  if (!rv.store) return failure;
  const std::string& text = failure.message();
  // Its own record, which the others read in rank order: every failed rank
  // marks its own, or a rank reading them could wait on it.
  if (!record_published) {
    Bytes record(4 + text.size());
    std::memcpy(record.data(), &kFailureRecord, 4);
    std::memcpy(record.data() + 4, text.data(), text.size());
    (void)rv.store->set(rv.key(gather_name + "/" + std::to_string(rv.rank)), record);
  }
  // The barrier carries the first failure only. A later one is often its
  // consequence (a rank that left makes connecting to it fail): that rank
  // reports the first, with its own after it.
  int64_t order = 0;
  if (!rv.store->add(rv.key(kFailureCountKey), 1, deadline, &order).ok()) return failure;
  if (order == 1) {
    Bytes open(5 + text.size());
    open[0] = kBarrierFailed;
    const int32_t rank = rv.rank;
    std::memcpy(open.data() + 1, &rank, 4);
    std::memcpy(open.data() + 5, text.data(), text.size());
    (void)rv.store->set(rv.key(barrier_name + "/open"), open);
    return failure;
  }
  Bytes open;
  if (!rv.store->get(rv.key(barrier_name + "/open"), deadline, &open).ok()) return failure;
  const Status first = barrier_failure(rv, open);
  if (first.ok()) return failure;
  return Status(first.code(), first.message() + " (here: " + text + ")");
}

void await_failure_heard(Rendezvous& rv, Clock::time_point deadline) {
  if (!rv.store) return;
  int64_t heard = 0;
  if (!rv.store->add(rv.key(kFailureHeardKey), 1, deadline, &heard).ok() || !rv.server) return;
  while (heard < rv.size && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (!rv.store->add(rv.key(kFailureHeardKey), 0, deadline, &heard).ok()) return;
  }
}

}  // namespace rr::bootstrap
