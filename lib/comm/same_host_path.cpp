// The same-host data path: when every rank of a communicator runs on this
// host, the ring moves its chunks through shared-memory slot rings
// (transport/shm/slot_ring.hpp, exec/shm_ring_executor.hpp) instead of UCX,
// and small calls take the one-shot schedules on a shared board
// (transport/shm/board.hpp, coll/one_shot.hpp). Set up once per
// communicator, at init; for each of the two, every rank uses it or none does.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "algo/memory_traffic.hpp"
#include "algo/ring.hpp"
#include "comm/communicator.hpp"
#include "common/log.hpp"
#include "exec/tags.hpp"
#include "exec/wait_policy.hpp"
#include "topo/caches.hpp"

namespace rr {

namespace {

// What a rank tells its left neighbour: whether it made a ring, and where
// to find it (its pid and the ring's descriptor there).
struct RingOffer {
  uint32_t magic = 0;
  int32_t usable = 0;
  int32_t pid = -1;
  int32_t fd = -1;
  uint64_t slots = 0;
  uint64_t slot_bytes = 0;
};
constexpr uint32_t kOfferMagic = 0x72726f66;  // "rrof"

// What rank 0 tells every rank: whether it made a board, and where.
struct BoardOffer {
  uint32_t magic = 0;
  int32_t usable = 0;
  int32_t pid = -1;
  int32_t fd = -1;
  uint64_t capacity = 0;
};
constexpr uint32_t kBoardMagic = 0x7272626f;  // "rrbo"

// A rank's vote: a bit for each part it can use (all must), and the CPUs
// it may run on, which rank 0 unites: the ranks share cores when they
// outnumber those CPUs together. Each rank's affinity alone would say so of
// ranks a launcher bound to a CPU each (mpirun -np 2 does by default),
// which share none.
constexpr uint8_t kVoteRings = 1;
constexpr uint8_t kVoteBoard = 2;
struct Vote {
  uint64_t cpus[exec::kCpuMaskWords] = {};
  uint8_t parts = 0;
};
// Rank 0's answer: the parts every rank can use, and the CPUs of them all.
struct Answer {
  int32_t cpus = 0;
  uint8_t parts = 0;
};

using exec::setup_tag;  // 0: the offers, 1: the votes to rank 0, 2: its answer, 3: its board offer

}  // namespace

Status Communicator::setup_same_host_path() {
  if (size_ < 2 || transport_->same_host_ranks() != size_) return Status::Ok();  // UCX between hosts
  const std::vector<int> order = ring_order();
  const algo::RingSchedule ring(size_, rank_, 1, 1, 0, algo::RingPhases::kBoth, order.data());
  const int left = ring.left();
  const int right = ring.right();
  const std::string name = "rank " + std::to_string(rank_) + ": setting up the same-host path";
  // Each rank's NUMA node as the transport heard it (-1 unknown): the
  // shared memory lives where the rank that reads it (a slot ring) or writes
  // it (a board cell) runs.
  std::vector<int> nodes = transport_->numa_of_ranks();
  if (nodes.size() != static_cast<size_t>(size_)) nodes.assign(static_cast<size_t>(size_), -1);
  const int my_node = nodes[static_cast<size_t>(rank_)];
  // A placement that fails leaves the memory where the kernel puts it: slower
  // across sockets, never wrong.
  auto unplaced = [&](const char* what, const Status& placed) {
    RR_LOG(LogLevel::kWarn, "rank %d: %s left unplaced: %s", rank_, what, placed.message().c_str());
  };

  // This rank's ring, for its left neighbour to send on.
  std::string why_not;  // this rank's reason to stay on UCX, for the log
  std::unique_ptr<transport::shm::SlotRing> from_left;
  RingOffer mine;
  mine.magic = kOfferMagic;
  mine.pid = static_cast<int32_t>(getpid());
  mine.slots = static_cast<uint64_t>(settings_.shm_slots);
  // RR_SHM_SLOT_BYTES when set. Else the default, or the communicator's
  // chunk when that is smaller (a small chunk_bytes is how tests reach many
  // chunk columns with small buffers, on either path).
  mine.slot_bytes = settings_.shm_slot_bytes;
  if (settings_.shm_slot_bytes_source.is_default()) {
    mine.slot_bytes = std::min<uint64_t>(mine.slot_bytes, (settings_.chunk_bytes + 63) / 64 * 64);
  }
  if (!settings_.same_host_shm) {
    why_not = "RR_SAME_HOST=ucx on rank " + std::to_string(rank_);
  } else {
    Status made = transport::shm::SlotRing::create(mine.slots, mine.slot_bytes, &from_left);
    if (made.ok()) {
      Status placed = from_left->place(my_node);
      if (!placed.ok()) unplaced("the slot ring", placed);
      mine.usable = 1;
      mine.fd = from_left->fd();
    } else {
      why_not = "rank " + std::to_string(rank_) + ": " + made.message();
    }
  }
  // Rank 0's board, for every rank.
  std::string board_why_not;
  std::unique_ptr<transport::shm::Board> board;
  BoardOffer board_offer;
  if (!settings_.same_host_shm) {
    board_why_not = "RR_SAME_HOST=ucx on rank " + std::to_string(rank_);
  } else if (settings_.shm_board_bytes == 0) {
    board_why_not = "RR_SHM_BOARD_BYTES=0 on rank " + std::to_string(rank_);
  } else if (rank_ == 0) {
    Status made = transport::shm::Board::create(size_, settings_.shm_board_bytes, &board);
    if (made.ok()) {
      Status placed = board->place_cells(nodes);
      if (!placed.ok()) unplaced("the board", placed);
      board_offer = {kBoardMagic, 1, static_cast<int32_t>(getpid()), board->fd(), settings_.shm_board_bytes};
    } else {
      board_why_not = "rank 0: " + made.message();
    }
  }
  RingOffer theirs;
  batch_->add_send(left, setup_tag(0), &mine, sizeof(mine));
  batch_->add_recv(right, setup_tag(0), &theirs, sizeof(theirs));
  for (int r = 1; r < size_ && rank_ == 0; ++r) batch_->add_send(r, setup_tag(3), &board_offer, sizeof(board_offer));
  if (rank_ != 0) batch_->add_recv(0, setup_tag(3), &board_offer, sizeof(board_offer));
  RR_RETURN_IF_ERROR(run_batch(*batch_, name));
  if (rank_ != 0 && board_why_not.empty()) {
    if (board_offer.magic != kBoardMagic || !board_offer.usable) {
      board_why_not = "rank 0 made no board";
    } else if (board_offer.capacity != settings_.shm_board_bytes) {
      board_why_not = "rank 0's board holds " + std::to_string(board_offer.capacity) + " bytes per call, rank " +
                      std::to_string(rank_) + "'s RR_SHM_BOARD_BYTES is " + std::to_string(settings_.shm_board_bytes);
    } else {
      Status attached = transport::shm::Board::attach(board_offer.pid, board_offer.fd, size_, board_offer.capacity, &board);
      if (!attached.ok()) board_why_not = "rank " + std::to_string(rank_) + " attaching to rank 0's board: " + attached.message();
    }
  }

  // The right neighbour's ring, to send on.
  std::unique_ptr<transport::shm::SlotRing> to_right;
  Vote vote;
  vote.parts = board ? kVoteBoard : 0;
  exec::usable_cpu_mask(vote.cpus);
  const bool both_offer = mine.usable && theirs.magic == kOfferMagic && theirs.usable;
  // Every rank cuts its chunks to its own slot: they must all be the same size.
  if (both_offer && theirs.slot_bytes != mine.slot_bytes) {
    why_not = "rank " + std::to_string(right) + "'s slots hold " + std::to_string(theirs.slot_bytes) + " bytes, rank " +
              std::to_string(rank_) + "'s " + std::to_string(mine.slot_bytes) + " (RR_SHM_SLOT_BYTES or chunk_bytes differ)";
  } else if (both_offer) {
    Status attached = transport::shm::SlotRing::attach(theirs.pid, theirs.fd, theirs.slots, theirs.slot_bytes, &to_right);
    if (attached.ok()) {
      vote.parts |= kVoteRings;
    } else {
      why_not = "rank " + std::to_string(rank_) + " attaching to rank " + std::to_string(right) + "'s ring: " +
                attached.message();
    }
  } else if (why_not.empty()) {
    why_not = "rank " + std::to_string(right) + " offered no ring";
  }

  // Every rank or none: rank 0 collects the votes and answers with what all can use.
  Answer answer;
  if (rank_ == 0) {
    std::vector<Vote> votes(static_cast<size_t>(size_), vote);
    for (int r = 1; r < size_; ++r) batch_->add_recv(r, setup_tag(1), &votes[static_cast<size_t>(r)], sizeof(Vote));
    RR_RETURN_IF_ERROR(run_batch(*batch_, name));
    answer.parts = vote.parts;
    uint64_t cpus[exec::kCpuMaskWords] = {};
    for (const Vote& v : votes) {
      answer.parts &= v.parts;
      for (int w = 0; w < exec::kCpuMaskWords; ++w) cpus[w] |= v.cpus[w];
    }
    for (uint64_t word : cpus) answer.cpus += __builtin_popcountll(word);
    for (int r = 1; r < size_; ++r) batch_->add_send(r, setup_tag(2), &answer, sizeof(answer));
    RR_RETURN_IF_ERROR(run_batch(*batch_, name));
  } else {
    batch_->add_send(0, setup_tag(1), &vote, sizeof(vote));
    batch_->add_recv(0, setup_tag(2), &answer, sizeof(answer));
    RR_RETURN_IF_ERROR(run_batch(*batch_, name));
  }
  const uint8_t all = answer.parts;
  host_cpus_ = answer.cpus;
  const bool shares_cores = size_ > host_cpus_;
  // Every rank has its copy of the board's descriptor by now.
  if (board) board->close_fd();
  if (all & kVoteBoard) {
    board_ = std::move(board);
    board_exec_ = std::make_unique<exec::BoardExecutor>(transport_.get(), board_.get(), rank_);
    one_shot_ = std::make_unique<coll::OneShot>(board_exec_.get(), size_, settings_.check_arguments);
    host_shape_.board_bytes = board_->capacity();
    host_shape_.shares_cores = shares_cores;
    if (rank_ == 0) {
      RR_LOG(LogLevel::kInfo, "rank 0: same-host small calls: one-shot on a shared-memory board, %zu bytes per call "
             "(RR_SHM_BOARD_BYTES, %s)", board_->capacity(), settings_.shm_board_bytes_source.text().c_str());
    }
  } else if (!board_why_not.empty() || rank_ == 0) {
    RR_LOG(LogLevel::kInfo, "rank %d: same-host small calls: UCX (%s)", rank_,
           board_why_not.empty() ? "another rank could not use the shared-memory board" : board_why_not.c_str());
  }
  if (!(all & kVoteRings)) {
    if (!why_not.empty() || rank_ == 0) {
      RR_LOG(LogLevel::kInfo, "rank %d: same-host ring data path: UCX (%s)", rank_,
             why_not.empty() ? "another rank could not use shared-memory slot rings" : why_not.c_str());
    }
    return Status::Ok();
  }
  // Every left neighbour has its copy of the descriptor by now.
  from_left->close_fd();
  shm_from_left_ = std::move(from_left);
  shm_to_right_ = std::move(to_right);
  shm_left_ = left;
  shm_right_ = right;
  shm_ring_ = std::make_unique<exec::ShmRingExecutor>(transport_.get(), shm_from_left_.get(), shm_to_right_.get());
  // Unset, streaming starts where the ranks' buffers outgrow the last-level
  // cache (a rank's own choice: it changes only how it writes its output).
  const size_t stream_bytes =
      settings_.shm_stream_bytes_source.is_default()
          ? algo::stream_threshold(topo::last_level_cache_bytes(), size_, settings_.shm_stream_bytes)
          : settings_.shm_stream_bytes;
  shm_ring_->set_stream_bytes(stream_bytes);
  // The allreduce selector prices the ring by its slot hand-overs now.
  host_shape_.slot_rings = true;
  host_shape_.shares_cores = shares_cores;
  if (rank_ == 0) {
    const bool placed = std::all_of(nodes.begin(), nodes.end(), [](int node) { return node >= 0; });
    RR_LOG(LogLevel::kInfo, "rank 0: same-host ring data path: shared-memory slot rings, %d x %zu bytes per rank (RR_SAME_HOST, %s), %s; "
           "outputs of %zu bytes and more streamed (RR_SHM_STREAM_BYTES, %s)",
           settings_.shm_slots, shm_from_left_->slot_bytes(), settings_.same_host_source.text().c_str(),
           placed ? "each on its reader's NUMA node" : "where the kernel puts them (the ranks' NUMA nodes are not all known)",
           stream_bytes, settings_.shm_stream_bytes_source.is_default() ? "the last-level cache's share" : settings_.shm_stream_bytes_source.text().c_str());
  }
  return Status::Ok();
}

uint64_t Communicator::bytes_sent(int peer) const {
  uint64_t bytes = transport_->bytes_sent(peer);
  if (shm_ring_ && peer == shm_right_) bytes += shm_ring_->bytes_sent();
  if (board_exec_) bytes += board_exec_->bytes_sent(peer);
  return bytes;
}

uint64_t Communicator::bytes_received(int peer) const {
  uint64_t bytes = transport_->bytes_received(peer);
  if (shm_ring_ && peer == shm_left_) bytes += shm_ring_->bytes_received();
  if (board_exec_) bytes += board_exec_->bytes_read(peer);
  return bytes;
}

}  // namespace rr
