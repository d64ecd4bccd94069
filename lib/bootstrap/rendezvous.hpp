#pragma once
// Init methods: how a rank finds its store, its rank and the world size
// (env://, tcp://host:port, file:///path, a unique id), and the exchanges
// made through the store while a communicator is set up.

#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "ringreduce/ringreduce.h"

namespace rr::bootstrap {

class TcpStoreServer;

struct Rendezvous {
  int rank = -1;
  int size = 0;
  std::unique_ptr<Store> store;
  // Set on the rank that serves the store; shared because one server may
  // outlive several communicators made with the same env:// address.
  std::shared_ptr<TcpStoreServer> server;
  std::string prefix;  // keys of this communicator live under it
  std::string method;  // "env://127.0.0.1:29500", for messages

  std::string key(const std::string& name) const { return prefix + name; }
};

// `url` is env://, tcp://host:port or file:///path. nranks or rank < 0 take
// WORLD_SIZE or RANK from the environment.
Status rendezvous_from_url(const std::string& url, int nranks, int rank, Clock::time_point deadline,
                           Rendezvous* out);
Status rendezvous_from_unique_id(const rrUniqueId& id, int nranks, int rank, Clock::time_point deadline,
                                 Rendezvous* out);
// Starts a store server in this process and describes how to reach it.
Status make_unique_id(rrUniqueId* id);

// Publishes `mine` and returns every rank's record, indexed by rank. Checks
// that every rank agrees on the world size and that no rank is taken twice.
Status all_gather(Rendezvous& rv, const std::string& name, const Bytes& mine, Clock::time_point deadline,
                  std::vector<Bytes>* all);
// Returns once every rank has called it, and (on the serving rank) once every
// rank has had its answer, so the server may go away afterwards.
Status barrier(Rendezvous& rv, const std::string& name, Clock::time_point deadline);

// A rank whose setup failed tells the others why, so that none of them waits
// for it until the deadline: its record of the exchange `gather_name` (unless
// `record_published`) carries `failure`, and so does the barrier
// `barrier_name` they would wait at, if no other rank's failure came first;
// all_gather and barrier then return kRemoteError naming the failed rank and
// quoting it. Returns what this rank reports: `failure`, or the first
// failure with this one after it. Best effort: a store that cannot be
// reached any more is not an error.
Status publish_failure(Rendezvous& rv, const std::string& gather_name, bool record_published,
                       const std::string& barrier_name, const Status& failure, Clock::time_point deadline);
// Every rank whose setup failed, or that heard of a failure, calls it once
// with its outcome. The serving rank returns once every rank has, or at
// `deadline`, so that a failure it published (or relays) reaches the ranks
// still connecting; the others return at once.
void await_failure_heard(Rendezvous& rv, Clock::time_point deadline);

}  // namespace rr::bootstrap
