// The communicators made from this one: rrCommSplit (MPI_Comm_split, over
// this communicator's collectives) and rrCommShrink. Each new communicator
// has a transport of its own (Transport::make_sibling), so its traffic never
// meets this one's, and is set up as init does (make_child).
//
// rrCommShrink with the caller's list (ULFM's MPI_Comm_shrink, NCCL's
// ncclCommShrink with an exclude list): the ranks not excluded make a new
// communicator among themselves, renumbered densely in the old order, with
// no store and no new rendezvous. The excluded ranks take no part (dead or
// alive). Each survivor sends every other one, over this communicator's
// transport (which still connects the survivors after a failure or a
// revocation broke the communicator's calls), the list it passed and the
// address of a new transport of its own; all must have passed the same
// list, and no survivor may have failed (the exchange fails naming it,
// within the timeout); then each connects the new transport, sets the new
// communicator up as a split does, and tells the others that it did (one
// that could not leaves the shrink saying so, below), so that nobody keeps
// a communicator a member failed to make.
//
// rrCommShrinkFailed (ULFM's MPI_Comm_shrink proper): the survivors first
// agree, among themselves, on which ranks failed (coll/agreement.hpp), then
// shrink those away as above; that exchange also checks that the agreement
// held (every survivor passes the list it decided).
//
// rrCommGrow's part here is what it asks of this communicator: rank 0's
// unique id to every rank (share_unique_id) and the check that every rank
// passed the same size and id (agree_on_growth); the grown communicator is
// made through that id's rendezvous, as init makes one (api/setup.hpp).
//
// The exchange's tags are neither a collective's, a point-to-point call's,
// a notice's nor the greeting's (exec/tags.hpp), and each shrink of this
// communicator has its own: a late message of the old communicator, or of
// an earlier attempt, reaches nothing.

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "coll/agreement.hpp"
#include "comm/communicator.hpp"
#include "common/log.hpp"
#include "exec/batch.hpp"
#include "exec/tags.hpp"

namespace rr {

namespace {

constexpr uint32_t kMagic = 0x4b535252;  // "RRSK"
// A peer's offer may be this much longer than this rank's (its address, or
// a list of another length, which is then named); each receive is only that
// large, so the exchange holds (N - 1) x (offer + 4 KiB) bytes at N ranks.
constexpr size_t kSlackBytes = 4096;

// Only an abort ends the exchange early: the communicator's own failure or
// revocation is what the shrink goes on from.
class AbortOnly final : public exec::Interrupt {
 public:
  explicit AbortOnly(const Communicator* comm) : comm_(comm) {}
  Status check() override {
    return comm_->aborting() ? InvalidUsage("the communicator was aborted (rrCommAbort)") : Status::Ok();
  }

 private:
  const Communicator* comm_;
};

// Every wait of one shrink on this rank (its exchanges, and the new
// communicator's set-up and greeting): ends when the communicator is
// aborted, or when another survivor says it left this shrink failing (one
// byte with the shrink's leave tag, from any rank). Without it, a survivor
// that found a rank gone and went on to agree again would leave the others
// waiting out the deadline for its part, and then perhaps counted as
// silent by that agreement.
class ShrinkWatch final : public exec::Interrupt {
 public:
  ShrinkWatch(const Communicator* comm, transport::Transport* transport, uint64_t tag)
      : comm_(comm), transport_(transport), tag_(tag) {
    posted_ = transport_->post_recv(transport::kAnySource, tag_, &byte_, 1, &word_).ok();
  }
  ~ShrinkWatch() {
    if (!posted_ || word_.done) return;
    transport_->cancel(&word_);
    const auto limit = exec::Clock::now() + std::chrono::seconds(1);
    while (!word_.done && exec::Clock::now() < limit) {
      if (!transport_->progress()) sched_yield();
    }
  }
  ShrinkWatch(const ShrinkWatch&) = delete;
  ShrinkWatch& operator=(const ShrinkWatch&) = delete;

  Status check() override {
    if (comm_->aborting()) return InvalidUsage("the communicator was aborted (rrCommAbort)");
    if (posted_ && !word_.done) (void)transport_->progress();
    if (posted_ && word_.done && !word_.failed) {
      return RemoteError("rank " + std::to_string(word_.peer) + " left this shrink (it failed there, and says so)");
    }
    return Status::Ok();
  }

  // This rank leaves the shrink failing: tells every other survivor (bounded:
  // a dead one is not waited for).
  void leave(const std::vector<int>& survivors, int self) {
    static const uint8_t kWord = 1;
    exec::Batch tell(transport_);
    tell.post_past_lost_peers();
    for (int r : survivors) {
      if (r != self) tell.add_send(r, tag_, &kWord, 1);
    }
    AbortOnly interrupt(comm_);
    (void)tell.run("rrCommShrink: telling the survivors that this rank left", exec::Clock::now() + std::chrono::seconds(1),
                   &interrupt);
  }

 private:
  const Communicator* comm_;
  transport::Transport* transport_;
  uint64_t tag_;
  uint8_t byte_ = 0;
  transport::Completion word_;
  bool posted_ = false;
};

std::string list_text(const std::vector<int>& ranks) {
  std::string text = "{";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "}";
}

// Of `ranks`, those other than `self` that `transport` knows gone now.
std::vector<int> gone_now(transport::Transport* transport, const std::vector<int>& ranks, int self) {
  transport->check_peers_now();
  std::vector<int> gone;
  for (int r : ranks) {
    if (r != self && !transport->peer_status(r).ok()) gone.push_back(r);
  }
  return gone;
}

void put_u32(std::vector<uint8_t>* out, uint32_t v) {
  const size_t at = out->size();
  out->resize(at + 4);
  std::memcpy(out->data() + at, &v, 4);
}

bool get_u32(const std::vector<uint8_t>& in, size_t* at, size_t bytes, uint32_t* v) {
  if (*at + 4 > bytes) return false;
  std::memcpy(v, in.data() + *at, 4);
  *at += 4;
  return true;
}

}  // namespace

Status Communicator::make_child(int new_rank, int new_size, const Settings& settings,
                                std::unique_ptr<transport::Transport> transport,
                                std::vector<std::vector<uint8_t>> addresses, std::unique_ptr<Communicator>* out,
                                exec::Interrupt* watch) {
  std::vector<int> neighbours;
  if (new_size > 1) neighbours.push_back((new_rank + 1) % new_size);
  if (new_size > 2) neighbours.push_back((new_rank + new_size - 1) % new_size);
  Status ready = transport->connect(std::move(addresses), neighbours);
  *out = std::make_unique<Communicator>(new_rank, new_size, settings, std::move(transport), keepalive_);
  (*out)->setup_watch_ = watch;
  if (ready.ok()) ready = (*out)->init();
  return ready;
}

Status Communicator::split(int color, int key, const Settings& settings, std::unique_ptr<Communicator>* out) {
  RR_RETURN_IF_ERROR(check_usable());
  // 1. Everyone learns everyone's (color, key).
  const int64_t mine[2] = {color, key};
  std::vector<int64_t> all(2 * static_cast<size_t>(size_));
  RR_RETURN_IF_ERROR(all_gather(mine, all.data(), 2, rrInt64));
  // 2. My group, ordered by (key, rank here).
  std::vector<int> members;
  for (int r = 0; r < size_ && color >= 0; ++r) {
    if (all[2 * static_cast<size_t>(r)] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[2 * static_cast<size_t>(a) + 1] < all[2 * static_cast<size_t>(b) + 1];
  });
  const int new_rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  const int new_size = static_cast<int>(members.size());
  // 3. A transport of its own, so the new communicator's traffic never meets
  //    this one's; its addresses travel over this communicator.
  std::unique_ptr<transport::Transport> child;
  Status made = color >= 0 ? transport_->make_sibling(new_rank, new_size, &child) : Status::Ok();
  // Every rank takes part in the exchange even when it opted out or failed,
  // so that no rank is left waiting; a failure is reported after it.
  const std::vector<uint8_t> none;
  const std::vector<uint8_t>& address = child ? child->local_address() : none;
  const uint64_t length = address.size();
  std::vector<uint64_t> lengths(static_cast<size_t>(size_));
  RR_RETURN_IF_ERROR(all_gather(&length, lengths.data(), 1, rrUint64));
  const uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<uint8_t> padded(longest), addresses(longest * static_cast<size_t>(size_));
  std::copy(address.begin(), address.end(), padded.begin());
  RR_RETURN_IF_ERROR(all_gather(padded.data(), addresses.data(), longest, rrUint8));
  RR_RETURN_IF_ERROR(made);
  if (color < 0) {
    // Take part in the members' final agreement, then stay out.
    const int32_t failed = 0;
    std::vector<int32_t> failures(static_cast<size_t>(size_));
    RR_RETURN_IF_ERROR(all_gather(&failed, failures.data(), 1, rrInt32));
    out->reset();
    return Status::Ok();
  }
  std::vector<std::vector<uint8_t>> theirs;
  for (int m : members) {
    const uint8_t* p = addresses.data() + static_cast<size_t>(m) * longest;
    theirs.emplace_back(p, p + lengths[static_cast<size_t>(m)]);
  }
  std::unique_ptr<Communicator> comm;
  Status ready = make_child(new_rank, new_size, settings, std::move(child), std::move(theirs), &comm);
  // Nobody keeps a sub-communicator that a member failed to make: its first
  // collective would wait for that member until the timeout.
  const int32_t failed = ready.ok() ? 0 : 1;
  std::vector<int32_t> failures(static_cast<size_t>(size_));
  RR_RETURN_IF_ERROR(all_gather(&failed, failures.data(), 1, rrInt32));
  RR_RETURN_IF_ERROR(ready);
  for (int r = 0; r < size_; ++r) {
    if (failures[static_cast<size_t>(r)] != 0) {
      return RemoteError("split: rank " + std::to_string(r) + " failed to make its sub-communicator");
    }
  }
  RR_RETURN_IF_ERROR(comm->greet_neighbours(exec::Clock::now() + std::chrono::milliseconds(settings.timeout_ms)));
  *out = std::move(comm);
  return Status::Ok();
}

Status Communicator::shrink(std::vector<int> exclude, const Settings& settings, std::unique_ptr<Communicator>* out) {
  const std::string name = "rrCommShrink";
  std::sort(exclude.begin(), exclude.end());
  for (size_t i = 0; i < exclude.size(); ++i) {
    const int r = exclude[i];
    if (r < 0 || r >= size_) {
      return InvalidArgument(name + ": excludeRanks holds " + std::to_string(r) + ", not a rank of this communicator of " +
                             std::to_string(size_));
    }
    if (i > 0 && exclude[i - 1] == r) return InvalidArgument(name + ": excludeRanks holds rank " + std::to_string(r) + " twice");
    if (r == rank_) return InvalidArgument(name + ": excludeRanks holds this rank (" + std::to_string(r) + ")");
  }
  std::vector<int> survivors;
  for (int r = 0; r < size_; ++r) {
    if (!std::binary_search(exclude.begin(), exclude.end(), r)) survivors.push_back(r);
  }
  const int new_rank = static_cast<int>(std::find(survivors.begin(), survivors.end(), rank_) - survivors.begin());
  const int new_size = static_cast<int>(survivors.size());
  const uint64_t epoch = shrinks_++;
  const auto until = exec::Clock::now() + std::chrono::milliseconds(settings.timeout_ms);
  ShrinkWatch watch(this, transport_.get(), exec::shrink_leave_tag(epoch));
  const Status shrunk = shrink_steps(exclude, survivors, new_rank, new_size, epoch, until, settings, &watch, out);
  if (!shrunk.ok()) watch.leave(survivors, rank_);
  return shrunk;
}

Status Communicator::shrink_steps(const std::vector<int>& exclude, const std::vector<int>& survivors, int new_rank,
                                  int new_size, uint64_t epoch, exec::Clock::time_point until, const Settings& settings,
                                  exec::Interrupt* watch, std::unique_ptr<Communicator>* out) {
  const std::string name = "rrCommShrink";
  const uint64_t offer_tag = exec::shrink_offer_tag(epoch);
  const uint64_t ready_tag = exec::shrink_ready_tag(epoch);

  // 1. A transport of its own for the new communicator, and the offer: the
  //    list this rank passed and that transport's address.
  std::unique_ptr<transport::Transport> child;
  RR_RETURN_IF_ERROR(transport_->make_sibling(new_rank, new_size, &child));
  const std::vector<uint8_t>& address = child->local_address();
  std::vector<uint8_t> offer;
  put_u32(&offer, kMagic);
  put_u32(&offer, static_cast<uint32_t>(exclude.size()));
  for (int r : exclude) put_u32(&offer, static_cast<uint32_t>(r));
  put_u32(&offer, static_cast<uint32_t>(address.size()));
  offer.insert(offer.end(), address.begin(), address.end());
  const size_t capacity = offer.size() + kSlackBytes;

  // 2. Every survivor's offer, over this communicator's transport.
  std::vector<std::vector<uint8_t>> offers(static_cast<size_t>(size_));
  // A survivor already known gone fails it once every live one has been
  // sent this rank's offer (post_past_lost_peers).
  exec::Batch exchange(transport_.get());
  exchange.post_past_lost_peers();
  exchange.reserve(2 * survivors.size());
  for (int r : survivors) {
    if (r == rank_) continue;
    offers[static_cast<size_t>(r)].resize(capacity);
    exchange.add_recv_up_to(r, offer_tag, offers[static_cast<size_t>(r)].data(), capacity);
  }
  // Sends to the next survivors first (wrapping), so that they do not all
  // send to the lowest rank at once.
  for (size_t k = 1; k < survivors.size(); ++k) {
    const int r = survivors[(static_cast<size_t>(new_rank) + k) % survivors.size()];
    exchange.add_send(r, offer_tag, offer.data(), offer.size());
  }
  // A step that failed names every survivor gone by then, not only the
  // first this rank waited on: the callers' lists fall short by all of them.
  const auto failed = [&](const Status& step) {
    const std::vector<int> gone = gone_now(transport_.get(), survivors, rank_);
    if (gone.empty()) return Status(step.code(), step.message() + " (excludeRanks " + list_text(exclude) + ")");
    return Status(step.code(), name + ": ranks outside excludeRanks " + list_text(exclude) + " failed too: " +
                                   list_text(gone) + " (" + step.message() + ")");
  };
  // Survivor r's offer (the `index`-th receive): not ok when malformed, or
  // when r passed another list (the caller's bug: rrInvalidUsage, naming
  // both); *address_at: where its address starts.
  const auto offer_of = [&](int r, size_t index, size_t* address_at) {
    const std::vector<uint8_t>& in = offers[static_cast<size_t>(r)];
    const size_t bytes = exchange.transfer(index).done.bytes;
    size_t at = 0;
    uint32_t magic = 0, n = 0, length = 0;
    std::vector<int> theirs;
    bool parsed = get_u32(in, &at, bytes, &magic) && magic == kMagic && get_u32(in, &at, bytes, &n) && n < 1u << 20;
    for (uint32_t i = 0; parsed && i < n; ++i) {
      uint32_t v = 0;
      parsed = get_u32(in, &at, bytes, &v);
      theirs.push_back(static_cast<int>(v));
    }
    parsed = parsed && get_u32(in, &at, bytes, &length) && at + length == bytes;
    if (!parsed) return RemoteError(name + ": rank " + std::to_string(r) + " sent a malformed offer");
    if (theirs != exclude) {
      return InvalidUsage(name + ": rank " + std::to_string(r) + " excluded " + list_text(theirs) + ", rank " +
                          std::to_string(rank_) + " excluded " + list_text(exclude) +
                          " (every survivor must pass the same excludeRanks)");
    }
    *address_at = at;
    return Status::Ok();
  };
  Status exchanged = exchange.run(name + ": the survivors' exchange of their lists and addresses", until, watch);
  if (!exchanged.ok()) {
    // Another list among the offers that did arrive is the cause to report
    // (the survivor that found it first left saying so, which may have
    // ended this wait before the rest came).
    size_t index = 0, at = 0;
    for (int r : survivors) {
      if (r == rank_) continue;
      const transport::Completion& got = exchange.transfer(index).done;
      const Status offer = got.done && !got.failed ? offer_of(r, index, &at) : Status::Ok();
      if (offer.code() == Code::kInvalidUsage) return offer;
      ++index;
    }
    return failed(exchanged);
  }

  // 3. The same list everywhere; the addresses in the new order.
  std::vector<std::vector<uint8_t>> addresses;
  size_t received = 0;
  for (int r : survivors) {
    if (r == rank_) {
      addresses.push_back(address);
      continue;
    }
    size_t at = 0;
    RR_RETURN_IF_ERROR(offer_of(r, received++, &at));
    const std::vector<uint8_t>& in = offers[static_cast<size_t>(r)];
    addresses.emplace_back(in.begin() + static_cast<std::ptrdiff_t>(at),
                           in.begin() + static_cast<std::ptrdiff_t>(exchange.transfer(received - 1).done.bytes));
  }

  // 4. The new communicator, set up as a split's; then every survivor says
  //    that it made its part. One that could not leaves the shrink at once
  //    (shrink() sends its word): the others may be inside the new
  //    communicator's set-up, waiting for it, and only the word ends that.
  std::unique_ptr<Communicator> comm;
  const Status ready = make_child(new_rank, new_size, settings, std::move(child), std::move(addresses), &comm, watch);
  if (!ready.ok()) return failed(ready);
  const uint8_t mine = 0;
  std::vector<uint8_t> theirs(static_cast<size_t>(size_), 0);
  exec::Batch tell(transport_.get());
  tell.post_past_lost_peers();
  tell.reserve(2 * survivors.size());
  for (int r : survivors) {
    if (r != rank_) tell.add_recv(r, ready_tag, &theirs[static_cast<size_t>(r)], 1);
  }
  for (size_t k = 1; k < survivors.size(); ++k) {
    tell.add_send(survivors[(static_cast<size_t>(new_rank) + k) % survivors.size()], ready_tag, &mine, 1);
  }
  Status told = tell.run(name + ": the survivors' word that their new communicator is made", until, watch);
  if (!told.ok()) return failed(told);  // a survivor that failed its part left instead of telling
  RR_RETURN_IF_ERROR(comm->greet_neighbours(until));
  comm->setup_watch_ = nullptr;
  *out = std::move(comm);
  return Status::Ok();
}

Status Communicator::agree_on_failed(int timeout_ms, std::vector<int>* failed_ranks, const std::vector<int>& known) {
  const std::string name = "the survivors' agreement on the failed ranks";
  // What this rank's transport knows failed already: mostly every loss the
  // survivors saw before they called, so that one round agrees.
  std::vector<bool> failed(static_cast<size_t>(size_), false);
  transport_->check_peers_now();
  for (int r = 0; r < size_; ++r) failed[static_cast<size_t>(r)] = r != rank_ && !transport_->peer_status(r).ok();
  for (int r : known) failed[static_cast<size_t>(r)] = true;
  const auto silence = std::chrono::milliseconds(timeout_ms);
  coll::Agreement agreement(transport_.get(), agreements_++, std::move(failed), silence);
  AbortOnly interrupt(this);
  // Each silent rank may cost `silence` (at most two, in practice: one that
  // stopped, and the rounds after it); the agreement's own bound.
  RR_RETURN_IF_ERROR(exec::drive(agreement, name, exec::Clock::now() + 3 * silence, &interrupt, transport_.get()));
  *failed_ranks = agreement.decided();
  for (int r : agreement.timed_out()) {
    RR_LOG(LogLevel::kWarn, "rank %d: %s: rank %d did not answer within %d ms: counted as failed", rank_,
           name.c_str(), r, timeout_ms);
  }
  RR_LOG(LogLevel::kInfo, "rank %d: %s: agreed in %d round(s) that %s failed", rank_, name.c_str(), agreement.rounds(),
         list_text(*failed_ranks).c_str());
  return Status::Ok();
}

Status Communicator::share_unique_id(const Status& made, rrUniqueId* id) {
  RR_RETURN_IF_ERROR(check_usable());
  struct Shared {
    int32_t ok;
    rrUniqueId id;
  } shared{};
  if (rank_ == 0) {
    shared.ok = made.ok() ? 1 : 0;
    shared.id = *id;
  }
  RR_RETURN_IF_ERROR(broadcast(&shared, &shared, sizeof(shared), rrUint8, 0));
  if (rank_ == 0) return made;
  if (shared.ok == 0) return RemoteError("rrCommGetUniqueId: rank 0 could not make the unique id (its error says why)");
  *id = shared.id;
  return Status::Ok();
}

Status Communicator::agree_on_growth(int nranks, const rrUniqueId& id) {
  RR_RETURN_IF_ERROR(check_usable());
  // (nranks, a 64-bit FNV-1a of the id) from every rank.
  uint64_t hash = 14695981039346656037ull;
  for (char c : id.internal) hash = (hash ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  const int64_t mine[2] = {nranks, static_cast<int64_t>(hash)};
  std::vector<int64_t> all(2 * static_cast<size_t>(size_));
  RR_RETURN_IF_ERROR(all_gather(mine, all.data(), 2, rrInt64));
  for (int r = 0; r < size_; ++r) {
    const int64_t theirs = all[2 * static_cast<size_t>(r)];
    if (theirs != nranks) {
      return InvalidUsage("rrCommGrow: rank " + std::to_string(r) + " passed nranks " + std::to_string(theirs) +
                          ", rank " + std::to_string(rank_) + " passed " + std::to_string(nranks));
    }
    if (all[2 * static_cast<size_t>(r) + 1] != mine[1]) {
      return InvalidUsage("rrCommGrow: rank " + std::to_string(r) + " passed another uniqueId than rank " +
                          std::to_string(rank_) + " (every rank passes the one rrCommGetUniqueId gave)");
    }
  }
  return Status::Ok();
}

Status Communicator::shrink_failed(const Settings& settings, std::unique_ptr<Communicator>* out,
                                   std::vector<int>* excluded) {
  const std::string name = "rrCommShrinkFailed";
  Status agreed = agree_on_failed(settings.timeout_ms, excluded);
  if (!agreed.ok()) return Status(agreed.code(), name + ": " + agreed.message());
  // A rank that dies during the shrink may have finished it for some
  // survivors and not for others (its last message reached only some, or a
  // survivor never needed one from it after that). So every survivor, with
  // the new communicator or without, agrees once more, starting from the set
  // just agreed: the agreement decides alike everywhere, so either all keep
  // the new communicator (nobody else failed) or all drop it and shrink
  // again without the new failures. Each attempt excludes one more rank at
  // least, so there are at most size_ of them.
  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<Communicator> made;
    const Status shrunk = shrink(*excluded, settings, &made);
    std::vector<int> confirmed;
    const Status again = agree_on_failed(settings.timeout_ms, &confirmed, *excluded);
    if (made && (!again.ok() || confirmed != *excluded)) made->expect_peer_loss();  // a member may be gone: no flush to it
    if (!again.ok()) {
      return Status(again.code(), name + ": confirming, after the shrink" +
                                      (shrunk.ok() ? std::string() : " (" + shrunk.message() + ")") + ": " +
                                      again.message());
    }
    if (confirmed == *excluded) {
      if (!shrunk.ok()) {
        return Status(shrunk.code(), name + ": after the survivors agreed that " + list_text(*excluded) +
                                         " failed: " + shrunk.message());
      }
      *out = std::move(made);
      return Status::Ok();
    }
    RR_LOG(LogLevel::kInfo, "rank %d: %s: %s failed during the shrink to %s (%s): shrinking again", rank_, name.c_str(),
           list_text(confirmed).c_str(), list_text(*excluded).c_str(),
           shrunk.ok() ? "made here" : shrunk.message().c_str());
    *excluded = std::move(confirmed);
    if (attempt >= size_) return InternalError(name + ": the failed set grew " + std::to_string(attempt) + " times");
  }
}

}  // namespace rr
