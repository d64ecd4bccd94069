#pragma once
// A board in memory shared by every rank of a communicator on one host: each
// rank has a cell, and in it publishes one message at a time (a 32-byte room
// for the caller's header, then up to capacity() bytes of data) that every
// other rank reads where it lies. The latency path on one host
// (coll/one_shot.hpp, exec/board_executor.hpp): an allreduce of a few bytes
// is one publication per rank and one read of each peer's, where a
// message-passing schedule needs log2(N) round trips.
//
// Every rank publishes 0, 1, 2, ... in the same order, and makes
// publication n + 1 only once it has read all it needs of everyone's n.
// The cell has two buffers that alternate, so a rank may write number n once
// every peer has published n - 1 (it is then done with n - 2, the
// buffer's last). Rank 0 makes the board (an anonymous memfd, segment.hpp)
// and the others attach to it.
//
// A publication's flag, length, header and first 24 bytes of data share one
// cache line: a small one moves between cores as one line. No system call
// on the data path: a rank that waits long sleeps on a futex on the flag it
// waits for, and the writer pays the wake-up only when a sleeper said so.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.hpp"

namespace rr::transport::shm {

class Board {
 public:
  // Room before each publication's data, for the caller's header.
  static constexpr size_t kHeaderRoom = 32;
  // The most data one publication may hold.
  static constexpr size_t kMaxCapacity = size_t{16} << 20;
  // A publication's length when it carries a header and no data (an
  // announcement); kNoData - k for small k are announcements too, of kinds
  // the caller tells apart. carries_data() says which a length is.
  static constexpr uint32_t kNoData = UINT32_MAX;
  static constexpr bool carries_data(uint32_t bytes) { return bytes <= kMaxCapacity; }

  Board(const Board&) = delete;
  Board& operator=(const Board&) = delete;
  ~Board();

  // Rank 0: a board of `ranks` cells whose publications hold up to
  // `capacity` bytes of data (a multiple of 64). fd() is what the others attach to.
  [[nodiscard]] static Status create(int ranks, size_t capacity, std::unique_ptr<Board>* out);
  // The others: maps the board that process `pid` made as its descriptor `fd`,
  // which must have `ranks` cells of `capacity`.
  [[nodiscard]] static Status attach(int pid, int fd, int ranks, size_t capacity, std::unique_ptr<Board>* out);

  // The maker, before it offers the board: each rank's cell on that rank's
  // NUMA node (`nodes`, one per rank, -1 unknown: left where the kernel
  // puts it; the header on rank 0's), every page touched now
  // (segment.hpp's place_pages). The cell's rank writes it, every rank
  // reads it: it lives where its one writer runs.
  [[nodiscard]] Status place_cells(const std::vector<int>& nodes);
  // Where rank `rank`'s cell starts (page-aligned), for the placement's tests.
  const void* cell_address(int rank) const { return cells_ + static_cast<size_t>(rank) * cell_bytes_; }

  // The maker's descriptor, until close_fd() (-1 after, and on the others).
  int fd() const { return fd_; }
  void close_fd();

  int ranks() const { return ranks_; }
  size_t capacity() const { return capacity_; }

  // Where `rank` writes its publication `n`: kHeaderRoom + capacity() bytes.
  uint8_t* buffer(int rank, uint64_t n) { return slot(rank, n)->room; }
  // Makes publication `n` of `rank` (this process's rank) visible: `bytes`
  // of data after the header room, or kNoData.
  void publish(int rank, uint64_t n, uint32_t bytes) {
    Slot* s = slot(rank, n);
    s->bytes = bytes;
    s->ready.store(static_cast<uint32_t>(n + 1), std::memory_order_seq_cst);
    if (sleepers(rank).load(std::memory_order_seq_cst) != 0) wake(&s->ready);
  }
  // Whether publication `n` of `rank` is there; *bytes: its length.
  bool published(int rank, uint64_t n, uint32_t* bytes) {
    Slot* s = slot(rank, n);
    if (s->ready.load(std::memory_order_acquire) != static_cast<uint32_t>(n + 1)) return false;
    *bytes = s->bytes;
    return true;
  }
  // Whether `rank` has made publication `n` or a later one (a rank need not
  // wait for peers that do not read it, so it may be ahead by more than one).
  bool published_at_least(int rank, uint64_t n) {
    return static_cast<int32_t>(publications(rank) - static_cast<uint32_t>(n + 1)) >= 0;
  }
  // How many publications `rank` has made (mod 2^32).
  uint32_t publications(int rank) {
    const uint32_t a = slot(rank, 0)->ready.load(std::memory_order_acquire);
    const uint32_t b = slot(rank, 1)->ready.load(std::memory_order_acquire);
    return static_cast<int32_t>(a - b) > 0 ? a : b;
  }

  // Sleep until `rank` has published `n` (or later), or at most
  // `timeout_ms`; a spurious return is fine.
  void sleep_until_published(int rank, uint64_t n, int timeout_ms);

 private:
  static constexpr uint64_t kMagic = 0x72722d626f617233;  // "rr-boar3": cells of whole pages
  static constexpr size_t kHeaderBytes = 4096;
  static constexpr size_t kLine = 64;
  static constexpr int kMaxRanks = 1 << 15;

  struct Header {
    uint64_t magic;
    uint64_t ranks;
    uint64_t capacity;
  };
  // One buffer of a cell, written by its rank only: the flag (1 + the
  // publication it holds; 0: none yet), the length, the header room, then
  // the data, of which the first 24 bytes share the flag's line.
  struct Slot {
    std::atomic<uint32_t> ready;
    uint32_t bytes;
    uint8_t room[kHeaderRoom];
  };
  static_assert(sizeof(Slot) == 8 + kHeaderRoom, "the data follows the header room");

  Board() = default;
  static bool shape_ok(int ranks, size_t capacity);
  static size_t slot_bytes(size_t capacity) { return (sizeof(Slot) + capacity + kLine - 1) / kLine * kLine; }
  // A line of waiters' count, then the two slots; whole pages, so that
  // each cell can live on its own NUMA node.
  static size_t cell_bytes(size_t capacity) {
    return (kLine + 2 * slot_bytes(capacity) + kHeaderBytes - 1) / kHeaderBytes * kHeaderBytes;
  }
  static size_t total_bytes(int ranks, size_t capacity) {
    return kHeaderBytes + static_cast<size_t>(ranks) * cell_bytes(capacity);
  }
  [[nodiscard]] static Status map(int fd, int ranks, size_t capacity, bool fresh, std::unique_ptr<Board>* out);
  uint8_t* cell(int rank) { return cells_ + static_cast<size_t>(rank) * cell_bytes_; }
  // Ranks sleeping on a flag of `rank`'s cell (raised by the waiters).
  std::atomic<uint32_t>& sleepers(int rank) { return *reinterpret_cast<std::atomic<uint32_t>*>(cell(rank)); }
  Slot* slot(int rank, uint64_t n) {
    return reinterpret_cast<Slot*>(cell(rank) + kLine + static_cast<size_t>(n & 1) * slot_bytes_);
  }
  static void wake(std::atomic<uint32_t>* word);

  int fd_ = -1;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  uint8_t* cells_ = nullptr;
  int ranks_ = 0;
  size_t capacity_ = 0;
  size_t slot_bytes_ = 0;
  size_t cell_bytes_ = 0;
};

}  // namespace rr::transport::shm
