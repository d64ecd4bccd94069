#pragma once
// A board in memory shared by every rank of a communicator on one host: each
// rank has a cell, and in it publishes one message at a time (a 64-byte room
// for the caller's header, then up to capacity() bytes of data) that every
// other rank reads where it lies. The latency path on one host
// (exec/board_executor.hpp): an allreduce of a few bytes is one publication
// per rank and one read of each peer's, where a message-passing schedule
// needs log2(N) round trips.
//
// Every rank publishes 0, 1, 2, ... in the same order; the cell has two
// buffers that alternate, so a rank may publish number n once every rank
// has finished reading number n - 2 (finished()). Rank 0 makes the board (an
// anonymous memfd, segment.hpp) and the others attach to it.
//
// No system call on the data path: a rank that waits long sleeps on a futex
// in the cell it waits for, and the writer pays the wake-up only when a
// sleeper said so.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.hpp"

namespace rr::transport::shm {

class Board {
 public:
  // Room before each publication's data, for the caller's header.
  static constexpr size_t kHeaderRoom = 64;
  // A publication's length when it carries a header and no data (an announcement).
  static constexpr uint32_t kNoData = UINT32_MAX;

  Board(const Board&) = delete;
  Board& operator=(const Board&) = delete;
  ~Board();

  // Rank 0: a board of `ranks` cells whose publications hold up to
  // `capacity` bytes of data (a multiple of 64). fd() is what the others attach to.
  [[nodiscard]] static Status create(int ranks, size_t capacity, std::unique_ptr<Board>* out);
  // The others: maps the board that process `pid` made as its descriptor `fd`,
  // which must have `ranks` cells of `capacity`.
  [[nodiscard]] static Status attach(int pid, int fd, int ranks, size_t capacity, std::unique_ptr<Board>* out);

  // The maker's descriptor, until close_fd() (-1 after, and on the others).
  int fd() const { return fd_; }
  void close_fd();

  int ranks() const { return ranks_; }
  size_t capacity() const { return capacity_; }

  // Where `rank` writes its publication `n`: kHeaderRoom + capacity() bytes.
  uint8_t* buffer(int rank, uint64_t n) {
    return cell(rank) + kControlBytes + static_cast<size_t>(n & 1) * buffer_bytes_;
  }
  // Makes publication `n` of `rank` (this process's rank) visible: `bytes`
  // of data after the header room, or kNoData.
  void publish(int rank, uint64_t n, uint32_t bytes) {
    Control& c = control(rank);
    c.bytes[n & 1] = bytes;
    c.ready[n & 1].store(static_cast<uint32_t>(n + 1), std::memory_order_seq_cst);
    if (c.sleepers.load(std::memory_order_seq_cst) != 0) wake(&c.ready[n & 1]);
  }
  // Whether publication `n` of `rank` is there; *bytes: its length.
  bool published(int rank, uint64_t n, uint32_t* bytes) {
    Control& c = control(rank);
    if (c.ready[n & 1].load(std::memory_order_acquire) != static_cast<uint32_t>(n + 1)) return false;
    *bytes = c.bytes[n & 1];
    return true;
  }
  // How many publications `rank` has made (mod 2^32), for error messages.
  uint32_t publications(int rank) {
    Control& c = control(rank);
    const uint32_t a = c.ready[0].load(std::memory_order_acquire), b = c.ready[1].load(std::memory_order_acquire);
    return static_cast<int32_t>(a - b) > 0 ? a : b;
  }
  // `rank` (this process's) has read everything it needs of publication `n`
  // of every rank.
  void finish(int rank, uint64_t n) {
    Control& c = control(rank);
    c.finished.store(static_cast<uint32_t>(n + 1), std::memory_order_seq_cst);
    if (c.sleepers.load(std::memory_order_seq_cst) != 0) wake(&c.finished);
  }
  // Whether `rank` has finished publication `n`.
  bool finished(int rank, uint64_t n) {
    const uint32_t done = control(rank).finished.load(std::memory_order_acquire);
    return static_cast<int32_t>(done - static_cast<uint32_t>(n + 1)) >= 0;
  }

  // Sleep until `rank` publishes `n` / finishes `n`, or at most `timeout_ms`;
  // a spurious return is fine.
  void sleep_until_published(int rank, uint64_t n, int timeout_ms);
  void sleep_until_finished(int rank, uint64_t n, int timeout_ms);

 private:
  static constexpr uint64_t kMagic = 0x72722d626f617264;  // "rr-board"
  static constexpr size_t kHeaderBytes = 4096;
  static constexpr size_t kControlBytes = 64;
  static constexpr int kMaxRanks = 1 << 15;
  static constexpr size_t kMaxCapacity = size_t{16} << 20;

  struct Header {
    uint64_t magic;
    uint64_t ranks;
    uint64_t capacity;
  };
  // The first cache line of a cell; written by its rank only, but for the
  // sleepers count, which the ranks waiting on it raise.
  struct Control {
    std::atomic<uint32_t> ready[2];  // 1 + the publication each buffer holds (0: none yet)
    uint32_t bytes[2];               // ... and its length
    std::atomic<uint32_t> finished;  // 1 + the last publication this rank finished reading
    std::atomic<uint32_t> sleepers;  // ranks sleeping on a word of this cell
  };
  static_assert(sizeof(Control) <= kControlBytes, "a cell's control fits one cache line");

  Board() = default;
  static bool shape_ok(int ranks, size_t capacity);
  static size_t buffer_bytes(size_t capacity) { return (kHeaderRoom + capacity + 63) / 64 * 64; }
  static size_t cell_bytes(size_t capacity) { return kControlBytes + 2 * buffer_bytes(capacity); }
  static size_t total_bytes(int ranks, size_t capacity) {
    return kHeaderBytes + static_cast<size_t>(ranks) * cell_bytes(capacity);
  }
  [[nodiscard]] static Status map(int fd, int ranks, size_t capacity, bool fresh, std::unique_ptr<Board>* out);
  uint8_t* cell(int rank) { return cells_ + static_cast<size_t>(rank) * cell_bytes_; }
  Control& control(int rank) { return *reinterpret_cast<Control*>(cell(rank)); }
  static void wake(std::atomic<uint32_t>* word);
  void sleep_on(int rank, std::atomic<uint32_t>* word, uint32_t seen, int timeout_ms);

  int fd_ = -1;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  uint8_t* cells_ = nullptr;
  int ranks_ = 0;
  size_t capacity_ = 0;
  size_t buffer_bytes_ = 0;
  size_t cell_bytes_ = 0;
};

}  // namespace rr::transport::shm
