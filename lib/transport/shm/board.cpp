#include "transport/shm/board.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "transport/shm/segment.hpp"

namespace rr::transport::shm {

namespace {
constexpr const char* kWhat = "shared-memory board";
}  // namespace

Board::~Board() {
  if (mapping_) munmap(mapping_, mapping_bytes_);
  close_fd();
}

void Board::close_fd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool Board::shape_ok(int ranks, size_t capacity) {
  return ranks >= 1 && ranks <= kMaxRanks && capacity != 0 && capacity % 64 == 0 && capacity <= kMaxCapacity;
}

Status Board::map(int fd, int ranks, size_t capacity, bool fresh, std::unique_ptr<Board>* out) {
  const size_t bytes = total_bytes(ranks, capacity);
  void* mapping = nullptr;
  RR_RETURN_IF_ERROR(map_segment(kWhat, fd, bytes, &mapping));
  std::unique_ptr<Board> board(new Board());
  board->mapping_ = mapping;
  board->mapping_bytes_ = bytes;
  board->cells_ = static_cast<uint8_t*>(mapping) + kHeaderBytes;
  board->ranks_ = ranks;
  board->capacity_ = capacity;
  board->slot_bytes_ = slot_bytes(capacity);
  board->cell_bytes_ = cell_bytes(capacity);
  auto* header = static_cast<Header*>(mapping);
  if (fresh) {
    // A new memfd reads as zeros: no publication yet.
    header->ranks = static_cast<uint64_t>(ranks);
    header->capacity = capacity;
    std::atomic_thread_fence(std::memory_order_release);
    header->magic = kMagic;
  } else if (header->magic != kMagic || header->ranks != static_cast<uint64_t>(ranks) || header->capacity != capacity) {
    return InternalError(std::string(kWhat) + ": the segment is not a board of " + std::to_string(ranks) +
                         " cells of " + std::to_string(capacity) + " bytes");
  }
  *out = std::move(board);
  return Status::Ok();
}

Status Board::create(int ranks, size_t capacity, std::unique_ptr<Board>* out) {
  if (!shape_ok(ranks, capacity)) {
    return InvalidArgument(std::string(kWhat) + ": " + std::to_string(ranks) + " cells of " + std::to_string(capacity) +
                           " bytes (expected 1.." + std::to_string(kMaxRanks) + " cells of a multiple of 64 bytes up to " +
                           std::to_string(kMaxCapacity) + ")");
  }
  int fd = -1;
  RR_RETURN_IF_ERROR(create_segment(kWhat, "ringreduce-board", total_bytes(ranks, capacity), &fd));
  Status mapped = map(fd, ranks, capacity, true, out);
  if (!mapped.ok()) {
    close(fd);
    return mapped;
  }
  (*out)->fd_ = fd;
  return Status::Ok();
}

Status Board::place_cells(const std::vector<int>& nodes) {
  if (nodes.size() != static_cast<size_t>(ranks_)) {
    return InvalidArgument(std::string(kWhat) + ": " + std::to_string(nodes.size()) + " NUMA nodes for " +
                           std::to_string(ranks_) + " cells");
  }
  RR_RETURN_IF_ERROR(place_pages(kWhat, mapping_, kHeaderBytes, nodes[0]));
  for (int r = 0; r < ranks_; ++r) {
    Status placed = place_pages(kWhat, cell(r), cell_bytes_, nodes[static_cast<size_t>(r)]);
    if (!placed.ok()) return Status(placed.code(), placed.message() + " (rank " + std::to_string(r) + "'s cell)");
  }
  return Status::Ok();
}

Status Board::attach(int pid, int fd, int ranks, size_t capacity, std::unique_ptr<Board>* out) {
  if (!shape_ok(ranks, capacity) || pid <= 0 || fd < 0) {
    return InvalidArgument(std::string(kWhat) + ": rank 0 offered pid " + std::to_string(pid) + " fd " +
                           std::to_string(fd) + ", " + std::to_string(ranks) + " cells of " + std::to_string(capacity) +
                           " bytes");
  }
  int local = -1;
  RR_RETURN_IF_ERROR(copy_descriptor(kWhat, pid, fd, &local));
  Status mapped = map(local, ranks, capacity, false, out);
  close(local);  // the mapping is all a rank needs
  return mapped;
}

void Board::wake(std::atomic<uint32_t>* word) { futex_wake_all(word); }

void Board::sleep_until_published(int rank, uint64_t n, int timeout_ms) {
  std::atomic<uint32_t>* word = &slot(rank, n)->ready;
  const uint32_t seen = word->load(std::memory_order_seq_cst);
  if (static_cast<int32_t>(seen - static_cast<uint32_t>(n + 1)) >= 0) return;
  // Count in before the last look: the writer then either sees the count
  // after its store (and wakes us) or stored before our look (no sleep).
  std::atomic<uint32_t>& waiting = sleepers(rank);
  waiting.fetch_add(1, std::memory_order_seq_cst);
  if (word->load(std::memory_order_seq_cst) == seen) futex_wait(word, seen, timeout_ms);
  waiting.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace rr::transport::shm
