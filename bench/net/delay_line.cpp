// rr-delay-line: holds every packet a network namespace receives for a fixed
// time, a link's one-way delay, where the kernel has no netem qdisc.
//
// Netfilter hands the packets to this process: rr-net-bench adds, in each
// host's namespace, an iptables rule that sends what arrives on the host's
// veth to NFQUEUE (mangle PREROUTING). The kernel keeps the packet; only its
// metadata comes up (NFQNL_COPY_META), and GSO packets come whole
// (NFQA_CFG_F_GSO), so a 1 Gbit/s link costs a few thousand wake-ups a
// second, not one per 1500 bytes. Each packet's verdict (accept) goes back
// once the delay has passed since it arrived; the delay is the same for all,
// so they leave in the order they came, and one batch verdict releases every
// packet that is due.
//
// On the receiving side, not the sender's egress: the packet has left the
// sending socket there (crossing the veth and the bridge orphans it), so the
// sender's TCP small-queues limit does not count the packets held here, as it
// would count packets held in the sender's qdisc (netem orphans them itself).
// The sender's shaper runs first, the delay after, as on a wire: the
// serialisation at the link's rate, then the propagation.
//
// usage: rr-delay-line --delay TIME [--queue N] [--limit PACKETS]
//   TIME in tc's form (500us, 2ms, 0.01s). Prints "rr-delay-line: ready ..."
//   on stdout once the queue is bound; on SIGTERM or SIGINT it unbinds (the
//   kernel drops what it still holds) and prints what it carried on stderr.
// Exit status: 0 stopped by a signal; 1 a netlink error (the message names
// it); 2 bad usage.

// glibc's <netinet/in.h> (through <arpa/inet.h>) before the kernel's headers,
// which then leave out their own copies of its types.
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "command_line.hpp"

namespace {

constexpr uint16_t kQueueMessage(uint16_t type) { return static_cast<uint16_t>((NFNL_SUBSYS_QUEUE << 8) | type); }

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rr-delay-line: %s\n", what.c_str());
  std::exit(1);
}
[[noreturn]] void die_usage(const std::string& what) {
  std::fprintf(stderr, "rr-delay-line: %s\nusage: rr-delay-line --delay TIME [--queue N] [--limit PACKETS]\n",
               what.c_str());
  std::exit(2);
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// tc's time form: a decimal number and us, ms or s.
bool parse_time_ns(const std::string& text, int64_t* ns) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || !std::isfinite(value) || value < 0) return false;
  const std::string unit(end);
  double scale;
  if (unit == "us") scale = 1e3;
  else if (unit == "ms") scale = 1e6;
  else if (unit == "s") scale = 1e9;
  else return false;
  *ns = static_cast<int64_t>(std::llround(value * scale));
  return *ns <= int64_t{60} * 1000000000;
}

bool parse_uint(const std::string& text, uint64_t max, uint64_t* value) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || text[0] == '-' || v > max) return false;
  *value = v;
  return true;
}

// One nfnetlink message for queue `queue`, built attribute by attribute.
class Message {
 public:
  Message(uint16_t type, uint16_t flags, uint16_t queue) : bytes_(NLMSG_SPACE(sizeof(nfgenmsg)), 0) {
    auto* header = reinterpret_cast<nlmsghdr*>(bytes_.data());
    header->nlmsg_type = kQueueMessage(type);
    header->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
    auto* generic = static_cast<nfgenmsg*>(NLMSG_DATA(header));
    generic->nfgen_family = AF_UNSPEC;
    generic->version = NFNETLINK_V0;
    generic->res_id = htons(queue);
  }
  template <typename T>
  void add(uint16_t type, const T& value) {
    const size_t at = bytes_.size();
    bytes_.resize(at + NLA_ALIGN(NLA_HDRLEN + sizeof(T)), 0);
    auto* attribute = reinterpret_cast<nlattr*>(bytes_.data() + at);
    attribute->nla_type = type;
    attribute->nla_len = static_cast<uint16_t>(NLA_HDRLEN + sizeof(T));
    std::memcpy(bytes_.data() + at + NLA_HDRLEN, &value, sizeof(T));
  }
  // Sends it; with NLM_F_ACK, waits for the kernel's answer and fails on an error.
  void send(int fd, uint32_t sequence, const char* what) {
    auto* header = reinterpret_cast<nlmsghdr*>(bytes_.data());
    header->nlmsg_len = static_cast<uint32_t>(bytes_.size());
    header->nlmsg_seq = sequence;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (sendto(fd, bytes_.data(), bytes_.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
      die(std::string(what) + ": send: " + std::strerror(errno));
    }
    if ((header->nlmsg_flags & NLM_F_ACK) == 0) return;
    alignas(nlmsghdr) char answer[8192];
    for (;;) {
      ssize_t got = recv(fd, answer, sizeof answer, 0);
      if (got < 0) {
        if (errno == EINTR) continue;
        die(std::string(what) + ": recv: " + std::strerror(errno));
      }
      for (auto* m = reinterpret_cast<nlmsghdr*>(answer); NLMSG_OK(m, got); m = NLMSG_NEXT(m, got)) {
        if (m->nlmsg_type != NLMSG_ERROR || m->nlmsg_seq != sequence) continue;
        if (m->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) die(std::string(what) + ": a short netlink error message");
        const int error = -static_cast<nlmsgerr*>(NLMSG_DATA(m))->error;
        if (error == 0) return;
        die(std::string(what) + ": " + std::strerror(error) +
            (error == EBUSY ? " (another process holds this queue: --queue picks another)" : ""));
      }
    }
  }

 private:
  std::vector<char> bytes_;
};

struct Held {
  uint32_t id;
  int64_t due_ns;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t delay_ns = -1;
  uint64_t queue = 0;
  uint64_t limit = 65536;
  bool help = false;
  std::string delay, queue_text, limit_text;
  rr::tools::CommandLine command_line("rr-delay-line");
  command_line.app.add_flag("-h,--help", help);
  command_line.app.add_option("--delay", delay);
  command_line.app.add_option("--queue", queue_text);
  command_line.app.add_option("--limit", limit_text);
  try {
    command_line.parse(argc, argv);
  } catch (const rr::tools::CommandLineError& e) {
    die_usage(e.what());
  }
  if (help) die_usage("holds each received packet for TIME");
  if (command_line.given("--delay") && !parse_time_ns(delay, &delay_ns)) {
    die_usage("--delay takes NUMBER{us,ms,s} up to 60s, not '" + delay + "'");
  }
  if (command_line.given("--queue") && !parse_uint(queue_text, 65535, &queue)) {
    die_usage("--queue takes 0..65535, not '" + queue_text + "'");
  }
  if (command_line.given("--limit") && (!parse_uint(limit_text, 1u << 24, &limit) || limit == 0)) {
    die_usage("--limit takes 1..16777216 packets, not '" + limit_text + "'");
  }
  if (delay_ns < 0) die_usage("--delay is required");

  // Wake-ups on time: the default 50 us of timer slack would add to each
  // delay, and ranks that spin on the same cores would make a verdict wait
  // for a time slice (measured up to 34 ms late at normal priority with 4
  // ranks on 2 cores). A wire does not wait for the CPU: run real-time where
  // allowed. This process only sleeps and answers, it never spins.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  sched_param priority{};
  priority.sched_priority = 10;
  const bool real_time = sched_setscheduler(0, SCHED_FIFO, &priority) == 0;

  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd < 0) die(std::string("netlink socket: ") + std::strerror(errno));
  // Room for every packet's notice while this process waits for the CPU; a
  // notice that does not fit drops its packet.
  const int buffer = 16 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof buffer) < 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  }
  sockaddr_nl self{};
  self.nl_family = AF_NETLINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof self) < 0) die(std::string("netlink bind: ") + std::strerror(errno));

  const auto q = static_cast<uint16_t>(queue);
  uint32_t sequence = 1;
  {
    Message bind_queue(NFQNL_MSG_CONFIG, NLM_F_ACK, q);
    nfqnl_msg_config_cmd command{};
    command.command = NFQNL_CFG_CMD_BIND;
    command.pf = htons(AF_INET);
    bind_queue.add(NFQA_CFG_CMD, command);
    bind_queue.send(fd, sequence++, "binding the queue");
  }
  {
    Message configure(NFQNL_MSG_CONFIG, NLM_F_ACK, q);
    nfqnl_msg_config_params params{};
    params.copy_range = htonl(0);
    params.copy_mode = NFQNL_COPY_META;
    configure.add(NFQA_CFG_PARAMS, params);
    configure.add(NFQA_CFG_QUEUE_MAXLEN, htonl(static_cast<uint32_t>(limit)));
    configure.add(NFQA_CFG_FLAGS, htonl(NFQA_CFG_F_GSO));
    configure.add(NFQA_CFG_MASK, htonl(NFQA_CFG_F_GSO));
    configure.send(fd, sequence++, "configuring the queue");
  }
  // Verdicts are not answered; a notice lost to a full buffer is an error
  // the kernel already counted as a drop, not one to stop for.
  const int on = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &on, sizeof on);

  struct sigaction action{};
  action.sa_handler = on_signal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);
  sigset_t blocked, during_wait;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGHUP);
  sigprocmask(SIG_BLOCK, &blocked, &during_wait);
  sigdelset(&during_wait, SIGTERM);
  sigdelset(&during_wait, SIGINT);
  sigdelset(&during_wait, SIGHUP);

  std::printf("rr-delay-line: ready, queue %llu, delay %.3f ms, limit %llu packets, %s\n",
              static_cast<unsigned long long>(queue), static_cast<double>(delay_ns) / 1e6,
              static_cast<unsigned long long>(limit), real_time ? "SCHED_FIFO" : "normal priority (SCHED_FIFO refused)");
  std::fflush(stdout);

  std::deque<Held> held;
  uint64_t carried = 0;
  size_t most_held = 0;
  int64_t latest_release_ns = 0;  // how late the worst verdict went, past its due time
  double total_late_ns = 0;       // and all of them together, for the mean
  uint64_t released = 0;
  uint64_t refused = 0;           // verdicts for packets the kernel no longer held
  std::vector<char> incoming(1 << 20);
  while (!g_stop) {
    const int64_t now = now_ns();
    bool release = false;
    uint32_t last_id = 0;
    while (!held.empty() && held.front().due_ns <= now) {
      last_id = held.front().id;
      const int64_t late = now - held.front().due_ns;
      if (late > latest_release_ns) latest_release_ns = late;
      total_late_ns += static_cast<double>(late);
      ++released;
      held.pop_front();
      release = true;
    }
    if (release) {
      Message verdict(NFQNL_MSG_VERDICT_BATCH, 0, q);
      nfqnl_msg_verdict_hdr accept{};
      accept.verdict = htonl(NF_ACCEPT);
      accept.id = htonl(last_id);
      verdict.add(NFQA_VERDICT_HDR, accept);
      verdict.send(fd, sequence++, "accepting packets");
    }

    pollfd wait_for{fd, POLLIN, 0};
    timespec timeout{};
    timespec* until = nullptr;
    if (!held.empty()) {
      const int64_t left = held.front().due_ns - now_ns();
      if (left <= 0) continue;
      timeout.tv_sec = left / 1000000000;
      timeout.tv_nsec = left % 1000000000;
      until = &timeout;
    }
    const int ready = ppoll(&wait_for, 1, until, &during_wait);
    if (ready < 0) {
      if (errno == EINTR) continue;
      die(std::string("ppoll: ") + std::strerror(errno));
    }
    if (ready == 0) continue;
    for (;;) {
      const ssize_t got = recv(fd, incoming.data(), incoming.size(), MSG_DONTWAIT);
      if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR || errno == ENOBUFS) continue;
        die(std::string("recv: ") + std::strerror(errno));
      }
      const int64_t arrived = now_ns();
      ssize_t left = got;
      for (auto* m = reinterpret_cast<nlmsghdr*>(incoming.data()); NLMSG_OK(m, left); m = NLMSG_NEXT(m, left)) {
        if (m->nlmsg_type == NLMSG_ERROR) {
          if (m->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) continue;
          const int error = -static_cast<nlmsgerr*>(NLMSG_DATA(m))->error;
          // ENOENT: the kernel had already dropped those packets (their
          // device went down, say); they are lost as on a wire, not a reason
          // to stop holding the rest (a queue without its reader drops all).
          if (error == ENOENT) ++refused;
          else if (error != 0) die(std::string("a verdict was refused: ") + std::strerror(error));
          continue;
        }
        if (m->nlmsg_type != kQueueMessage(NFQNL_MSG_PACKET)) continue;
        const size_t skip = NLMSG_ALIGN(sizeof(nfgenmsg));
        auto* attribute = reinterpret_cast<nlattr*>(static_cast<char*>(NLMSG_DATA(m)) + skip);
        int room = static_cast<int>(m->nlmsg_len - NLMSG_HDRLEN - skip);
        while (room >= static_cast<int>(NLA_HDRLEN) && attribute->nla_len >= NLA_HDRLEN &&
               attribute->nla_len <= room) {
          if ((attribute->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR &&
              attribute->nla_len >= NLA_HDRLEN + sizeof(nfqnl_msg_packet_hdr)) {
            nfqnl_msg_packet_hdr packet;
            std::memcpy(&packet, reinterpret_cast<char*>(attribute) + NLA_HDRLEN, sizeof packet);
            held.push_back({ntohl(packet.packet_id), arrived + delay_ns});
            ++carried;
            break;
          }
          room -= NLA_ALIGN(attribute->nla_len);
          attribute = reinterpret_cast<nlattr*>(reinterpret_cast<char*>(attribute) + NLA_ALIGN(attribute->nla_len));
        }
      }
      if (held.size() > most_held) most_held = held.size();
    }
  }
  close(fd);  // unbinds: the kernel drops what it still holds
  std::fprintf(stderr,
               "rr-delay-line: carried %llu packets, at most %zu held at once; verdicts past due by %.3f ms on "
               "average, %.3f ms at most; %llu verdicts found their packets gone\n",
               static_cast<unsigned long long>(carried), most_held,
               released == 0 ? 0.0 : total_late_ns / static_cast<double>(released) / 1e6,
               static_cast<double>(latest_release_ns) / 1e6, static_cast<unsigned long long>(refused));
  return 0;
}
