#include "bootstrap/file_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "bootstrap/encoding.hpp"

namespace rr::bootstrap {
namespace {

using file_store::kMaxKeyBytes;
using file_store::kMaxValueBytes;
using file_store::kRecordHeaderBytes;
using file_store::kRecordMagic;

// get() polls the file: first quickly (the key is often just about to be
// written), then every kMaxPollInterval so that waiting ranks do not keep the
// file system busy.
constexpr std::chrono::milliseconds kFirstPollInterval{1};
constexpr std::chrono::milliseconds kMaxPollInterval{10};

std::string to_hex(uint32_t v) {
  static const char kDigits[] = "0123456789abcdef";
  std::string text = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) text.push_back(kDigits[(v >> shift) & 0xf]);
  return text;
}

}  // namespace

// Takes an fcntl lock on the whole file and releases it when the scope ends.
class FileStore::RangeLock {
 public:
  explicit RangeLock(FileStore* store) : store_(store) {}
  ~RangeLock() {
    if (locked_) (void)apply(F_UNLCK);
  }
  RangeLock(const RangeLock&) = delete;
  RangeLock& operator=(const RangeLock&) = delete;

  // Blocks until the lock (F_RDLCK or F_WRLCK) is held.
  Status acquire(short type) {
    int error = apply(type);
    if (error != 0) {
      return SystemError(std::string("cannot ") + (type == F_WRLCK ? "write" : "read") +
                         "-lock file store " + store_->path_ + ": " + errno_text(error));
    }
    locked_ = true;
    return Status::Ok();
  }

 private:
  int apply(short type) {
    for (;;) {
      flock lock{};
      lock.l_type = type;
      lock.l_whence = SEEK_SET;
      lock.l_start = 0;
      lock.l_len = 0;  // to the end of the file, however far it grows
      lock.l_pid = 0;  // required for OFD locks
      const int command = store_->ofd_locks_ ? F_OFD_SETLKW : F_SETLKW;
      if (fcntl(store_->fd_.get(), command, &lock) == 0) return 0;
      if (errno == EINTR) continue;
      if (errno == EINVAL && store_->ofd_locks_) {
        // A kernel or file system without OFD locks: classic locks still
        // exclude other processes; mutex_ excludes this store's threads.
        store_->ofd_locks_ = false;
        continue;
      }
      return errno;
    }
  }

  FileStore* store_;
  bool locked_ = false;
};

Status FileStore::Open(const std::string& path, std::unique_ptr<FileStore>* out) {
  if (path.empty()) return InvalidArgument("file store path is empty");
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) return SystemError("cannot open file store " + path + ": " + errno_text(errno));
  struct stat info {};
  if (fstat(fd.get(), &info) != 0) {
    return SystemError("cannot stat file store " + path + ": " + errno_text(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    return InvalidArgument("file store " + path + " is not a regular file");
  }
  out->reset(new FileStore(path, std::move(fd)));
  return Status::Ok();
}

Status FileStore::check_sizes(const std::string& key, size_t value_size) const {
  if (key.size() > kMaxKeyBytes) {
    return InvalidArgument("key " + quote_key(key) + " is longer than the file store's limit of " +
                           std::to_string(kMaxKeyBytes) + " bytes");
  }
  if (value_size > kMaxValueBytes) {
    return InvalidArgument("value of " + std::to_string(value_size) + " bytes for key " +
                           quote_key(key) + " exceeds the file store's limit of " +
                           std::to_string(kMaxValueBytes) + " bytes");
  }
  return Status::Ok();
}

Status FileStore::scan_locked() {
  struct stat info {};
  if (fstat(fd_.get(), &info) != 0) {
    return SystemError("cannot stat file store " + path_ + ": " + errno_text(errno));
  }
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size < scanned_bytes_) {
    // Records are never removed; a shorter file was truncated or replaced
    // under us, and what we already read may no longer be true.
    return RemoteError("file store " + path_ + " shrank from " + std::to_string(scanned_bytes_) +
                       " to " + std::to_string(size) + " bytes");
  }
  if (size == scanned_bytes_) return Status::Ok();

  std::vector<uint8_t> data(size - scanned_bytes_);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = pread(fd_.get(), data.data() + done, data.size() - done,
                      static_cast<off_t>(scanned_bytes_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return SystemError("cannot read file store " + path_ + " at offset " +
                         std::to_string(scanned_bytes_ + done) + ": " + errno_text(errno));
    }
    if (n == 0) {
      return RemoteError("file store " + path_ + " ended at offset " +
                         std::to_string(scanned_bytes_ + done) + " while its size is " +
                         std::to_string(size) + " bytes");
    }
    done += static_cast<size_t>(n);
  }

  // Each record is applied and counted as scanned as soon as it parses, so a
  // bad record is reported at its own offset on every later scan too.
  size_t pos = 0;
  while (pos < data.size()) {
    const uint64_t offset = scanned_bytes_;
    const size_t remaining = data.size() - pos;
    auto corrupt = [&](const std::string& what) {
      return RemoteError("file store " + path_ + ": corrupt record at offset " +
                         std::to_string(offset) + ": " + what);
    };
    if (remaining < kRecordHeaderBytes) {
      return corrupt("truncated header (" + std::to_string(remaining) + " of " +
                     std::to_string(kRecordHeaderBytes) + " bytes)");
    }
    const uint8_t* header = data.data() + pos;
    const uint32_t magic = get_u32(header);
    const uint32_t key_length = get_u32(header + 4);
    const uint32_t value_length = get_u32(header + 8);
    if (magic != kRecordMagic) return corrupt("bad magic " + to_hex(magic));
    if (key_length > kMaxKeyBytes) {
      return corrupt("key length " + std::to_string(key_length) + " exceeds " +
                     std::to_string(kMaxKeyBytes));
    }
    if (value_length > kMaxValueBytes) {
      return corrupt("value length " + std::to_string(value_length) + " exceeds " +
                     std::to_string(kMaxValueBytes));
    }
    const size_t record_size = size_t{kRecordHeaderBytes} + key_length + value_length;
    if (remaining < record_size) {
      return corrupt("truncated: needs " + std::to_string(record_size) + " bytes, " +
                     std::to_string(remaining) + " remain");
    }
    const uint8_t* key = header + kRecordHeaderBytes;
    const uint8_t* value = key + key_length;
    values_[std::string(reinterpret_cast<const char*>(key), key_length)] =
        Bytes(value, value + value_length);
    pos += record_size;
    scanned_bytes_ += record_size;
  }
  return Status::Ok();
}

Status FileStore::append_locked(const std::string& key, const Bytes& value) {
  std::vector<uint8_t> record;
  record.reserve(kRecordHeaderBytes + key.size() + value.size());
  append_u32(&record, kRecordMagic);
  append_u32(&record, static_cast<uint32_t>(key.size()));
  append_u32(&record, static_cast<uint32_t>(value.size()));
  record.insert(record.end(), key.begin(), key.end());
  record.insert(record.end(), value.begin(), value.end());

  size_t done = 0;
  while (done < record.size()) {
    ssize_t n = pwrite(fd_.get(), record.data() + done, record.size() - done,
                       static_cast<off_t>(scanned_bytes_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      // Take back the partial record while we still hold the lock, so the
      // file stays readable for everyone.
      (void)!ftruncate(fd_.get(), static_cast<off_t>(scanned_bytes_));
      return SystemError("cannot append to file store " + path_ + " at offset " +
                         std::to_string(scanned_bytes_) + ": " + errno_text(error));
    }
    done += static_cast<size_t>(n);
  }
  scanned_bytes_ += record.size();
  values_[key] = value;
  return Status::Ok();
}

Status FileStore::set(const std::string& key, const Bytes& value) {
  RR_RETURN_IF_ERROR(check_sizes(key, value.size()));
  std::lock_guard<std::mutex> guard(mutex_);
  RangeLock lock(this);
  RR_RETURN_IF_ERROR(lock.acquire(F_WRLCK));
  RR_RETURN_IF_ERROR(scan_locked());
  return append_locked(key, value);
}

Status FileStore::get(const std::string& key, Clock::time_point deadline, Bytes* value) {
  const auto start = Clock::now();
  auto interval = std::chrono::duration_cast<Clock::duration>(kFirstPollInterval);
  for (;;) {
    {
      // Always scan, even when the key is cached: a later set() may have
      // replaced it, and a scan with nothing new costs one fstat.
      std::lock_guard<std::mutex> guard(mutex_);
      RangeLock lock(this);
      RR_RETURN_IF_ERROR(lock.acquire(F_RDLCK));
      RR_RETURN_IF_ERROR(scan_locked());
      auto it = values_.find(key);
      if (it != values_.end()) {
        *value = it->second;
        return Status::Ok();
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
      return Timeout("get of key " + quote_key(key) + " from file store " + path_ +
                     " timed out after " + std::to_string(waited.count()) +
                     " ms: the key was not set");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(interval, deadline - now));
    interval = std::min<Clock::duration>(interval * 2, kMaxPollInterval);
  }
}

Status FileStore::add(const std::string& key, int64_t delta, Clock::time_point /*deadline*/,
                      int64_t* result) {
  RR_RETURN_IF_ERROR(check_sizes(key, 0));
  std::lock_guard<std::mutex> guard(mutex_);
  // Read-modify-write under one write lock: no other rank can append between
  // reading the current value and appending the new one.
  RangeLock lock(this);
  RR_RETURN_IF_ERROR(lock.acquire(F_WRLCK));
  RR_RETURN_IF_ERROR(scan_locked());
  auto it = values_.find(key);
  int64_t sum = 0;
  RR_RETURN_IF_ERROR(add_to_counter(key, it == values_.end() ? nullptr : &it->second, delta, &sum));
  RR_RETURN_IF_ERROR(append_locked(key, counter_text(sum)));
  *result = sum;
  return Status::Ok();
}

}  // namespace rr::bootstrap
