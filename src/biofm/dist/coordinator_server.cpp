// Rank 0 of the coordinator: waits for every rank (the rendezvous), then serves them from one
// thread that polls all connections, answers the store and the all-gathers, and watches every
// rank's liveness. Rank 0's own calls reach that thread through an in-process inbox.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "biofm/core/error.h"
#include "biofm/dist/coordinator_impl.h"

namespace biofm::coord {

namespace {

// A connection that says nothing (a port scanner, a hung process) gets this long, not the
// whole connect timeout: it must not look like a rank that is on its way.
constexpr auto kHelloTimeout = std::chrono::seconds(5);
// How long a FAILED notice may take to go out to one rank.
constexpr auto kNoticeTimeout = std::chrono::seconds(1);

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

class Rank0 final : public Coordinator::Impl {
 public:
  Rank0(const DistEnv& e, const CoordinatorOptions& o, Coordinator::FailureHandler h)
      : Impl(e, o, std::move(h)), ranks_(size_t(e.world_size)), gather_queues_(size_t(e.world_size)) {
    rendezvous(Clock::now() + opt.connect_timeout);
    thread_ = std::thread([this] { serve(); });
  }
  ~Rank0() override { shutdown(); }

  void set(const std::string& key, const std::string& value) override {
    post(Msg::set, PayloadWriter().str(key).str(value).take());
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    const uint64_t id = mailbox.new_request_id();
    post(Msg::get, PayloadWriter().u64(id).str(key).take());
    return mailbox.wait_value(id, key, 0, Clock::now() + timeout);
  }

  std::vector<std::string> all_gather(const std::string& mine) override {
    post(Msg::gather, mine);
    return mailbox.wait_gathered();
  }

  void finish() override {
    // The server thread gives up after heartbeat_timeout; the margin is for a busy machine.
    std::string problem;
    bool done = false;
    if (!failed()) {
      post(Msg::bye, {});
      done = mailbox.wait_finished(Clock::now() + opt.heartbeat_timeout + std::chrono::seconds(5), problem);
    }
    shutdown();
    if (done && !problem.empty()) fail(problem);
  }

  void shutdown() noexcept override {
    stop_ = true;
    wake_.wake();
    if (thread_.joinable()) thread_.join();
    for (auto& r : ranks_) r.fd.reset();
    listener_.reset();
  }

 private:
  // What rank 0 knows about one rank (entry 0: itself, with no connection).
  struct RankState {
    net::Fd fd;
    FrameBuffer in;
    Clock::time_point last_heard{};
    int64_t step = -1;
    Clock::time_point step_since{};
    int phase = 0;  // Coordinator::Phase
    bool said_bye = false;
  };

  std::string where() const { return net::where(env.master_addr, env.master_port); }
  bool connected(int r) const { return r > 0 && ranks_[size_t(r)].fd.valid(); }

  // --- the rendezvous (in the constructor, before the thread starts) ---

  // Tells the ranks connected so far (and the process that caused it, if one did) why.
  [[noreturn]] void fail_rendezvous(const std::string& why, int culprit_fd = -1) {
    const std::string message = "coordinator at " + where() + ": " + why;
    const std::string notice = encode(Msg::failed, message);
    std::vector<int> fds;
    for (int r = 1; r < env.world_size; ++r)
      if (connected(r)) fds.push_back(ranks_[size_t(r)].fd.get());
    if (culprit_fd >= 0) fds.push_back(culprit_fd);
    for (int fd : fds) net::write_all(fd, notice.data(), notice.size(), Clock::now() + kNoticeTimeout);
    fail(message);
  }

  void rendezvous(Clock::time_point deadline) {
    try {
      listener_ = net::listen_on(env.master_port, env.world_size);
    } catch (const Error& e) {
      fail("coordinator: rank 0 ", e.what());
    }
    struct Newcomer {
      net::Fd fd;
      FrameBuffer in;
      Clock::time_point hello_by;
    };
    std::vector<Newcomer> newcomers;
    int arrived = 1;
    while (arrived < env.world_size) {
      std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
      auto wake_at = deadline;
      for (const auto& n : newcomers) {
        fds.push_back({n.fd.get(), POLLIN, 0});
        wake_at = std::min(wake_at, n.hello_by);
      }
      for (int r = 1; r < env.world_size; ++r)  // to notice one that leaves again
        if (connected(r)) fds.push_back({ranks_[size_t(r)].fd.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), net::ms_left(wake_at)) < 0 && errno != EINTR)
        fail("coordinator: poll failed");
      const auto now = Clock::now();
      if (now >= deadline) {
        std::vector<int> missing;
        for (int r = 1; r < env.world_size; ++r)
          if (!connected(r)) missing.push_back(r);
        fail_rendezvous("rank(s) " + rank_list(missing) + " of " + std::to_string(env.world_size) +
                        " never arrived within " + seconds_text(opt.connect_timeout) + " s");
      }
      for (size_t i = 1 + newcomers.size(); i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        const int r = int(std::find_if(ranks_.begin(), ranks_.end(), [&](const RankState& s) {
                            return s.fd.get() == fds[i].fd;
                          }) - ranks_.begin());
        if (!pump(fds[i].fd, ranks_[size_t(r)].in))
          fail_rendezvous("rank " + std::to_string(r) + " closed its connection before every rank arrived");
      }
      // Newcomers: a valid HELLO makes a rank; anything else, or silence, is dropped.
      for (size_t i = 0; i < newcomers.size(); ++i) {
        auto& n = newcomers[i];
        const bool alive = fds[1 + i].revents == 0 || pump(n.fd.get(), n.in);
        std::optional<Frame> hello;
        try {
          hello = n.in.next();
        } catch (const Error&) {  // not one of ours
          n.fd.reset();
          continue;
        }
        if (!hello) {
          if (!alive || now >= n.hello_by) n.fd.reset();
          continue;
        }
        PayloadReader p(hello->payload);
        if (hello->type != Msg::hello || hello->payload.size() != 12 || p.u32() != kMagic) {
          n.fd.reset();
          continue;
        }
        const int r = int(p.u32());
        const int world = int(p.u32());
        if (world != env.world_size)
          fail_rendezvous("rank " + std::to_string(r) + " was started with world size " + std::to_string(world) +
                              ", rank 0 with " + std::to_string(env.world_size),
                          n.fd.get());
        if (r <= 0 || r >= env.world_size) fail_rendezvous("a process claims rank " + std::to_string(r), n.fd.get());
        if (connected(r)) fail_rendezvous("a second process claims rank " + std::to_string(r), n.fd.get());
        ranks_[size_t(r)].fd = std::move(n.fd);
        ranks_[size_t(r)].in = std::move(n.in);
        ++arrived;
      }
      std::erase_if(newcomers, [](const Newcomer& n) { return !n.fd.valid(); });
      if (fds[0].revents != 0)
        for (net::Fd c = net::accept_from(listener_.get()); c.valid(); c = net::accept_from(listener_.get()))
          newcomers.push_back({std::move(c), FrameBuffer(), now + kHelloTimeout});
    }
    listener_.reset();  // every rank is here; later connections are refused
    const auto now = Clock::now();
    for (int r = 1; r < env.world_size; ++r) {
      ranks_[size_t(r)].last_heard = now;
      if (!notify(r, Msg::welcome, {}, now + opt.heartbeat_timeout))
        fail_rendezvous("rank " + std::to_string(r) + " went away before the rendezvous completed");
    }
  }

  // --- the server thread ---

  // Hands one of rank 0's own messages to the server thread.
  void post(Msg type, std::string payload) {
    {
      std::lock_guard lock(inbox_m_);
      inbox_.push_back({type, std::move(payload)});
    }
    wake_.wake();
  }

  void serve() {
    auto next_heartbeat = Clock::now();
    while (!stop_ && !over_) {
      std::vector<pollfd> fds{{wake_.read_fd(), POLLIN, 0}};
      std::vector<int> fd_rank{0};
      for (int r = 1; r < env.world_size; ++r)
        if (connected(r)) {
          fds.push_back({ranks_[size_t(r)].fd.get(), POLLIN, 0});
          fd_rank.push_back(r);
        }
      ::poll(fds.data(), fds.size(), net::ms_left(next_heartbeat));
      if (fds[0].revents != 0) wake_.drain();
      std::deque<Frame> mine;
      {
        std::lock_guard lock(inbox_m_);
        mine.swap(inbox_);
      }
      for (auto& f : mine) handle(0, f);
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents != 0) read_from(fd_rank[i]);

      const auto now = Clock::now();
      if (now >= next_heartbeat) {
        if (!heartbeats_paused)
          for (int r = 1; r < env.world_size; ++r)
            if (connected(r)) send_to(r, Msg::heartbeat, {});
        next_heartbeat = now + opt.heartbeat_interval;
      }
      check_liveness(now);
      check_steps(now);
      check_finish(now);
    }
  }

  void read_from(int r) {
    auto& s = ranks_[size_t(r)];
    const bool alive = pump(s.fd.get(), s.in);
    try {
      while (auto f = s.in.next()) {
        if (over_) return;
        s.last_heard = Clock::now();
        handle(r, *f);
      }
    } catch (const Error& e) {
      return declare_failure("rank " + std::to_string(r) + " sent a message rank 0 cannot read (" + e.what() + ")");
    }
    if (!alive && connected(r)) lost(r);
  }

  void handle(int r, const Frame& f) {
    if (over_) return;
    try {
      PayloadReader p(f.payload);
      switch (f.type) {
        case Msg::set: {
          std::string key = p.str();
          store_[key] = p.str();
          answer_waiting_gets(key);
          return;
        }
        case Msg::get: {
          const uint64_t id = p.u64();
          std::string key = p.str();
          if (const auto it = store_.find(key); it != store_.end())
            send_to(r, Msg::value, PayloadWriter().u64(id).str(it->second).take());
          else
            waiting_gets_.push_back({r, id, std::move(key)});
          return;
        }
        case Msg::gather:
          gather_queues_[size_t(r)].push_back(f.payload);
          complete_gathers();
          return check_gathers_after_bye();
        case Msg::heartbeat: {
          auto& s = ranks_[size_t(r)];
          s.step = int64_t(p.u64());
          const uint64_t ms_in_step = std::min<uint64_t>(p.u64(), uint64_t(1) << 40);  // no overflow below
          s.step_since = Clock::now() - std::chrono::milliseconds(ms_in_step);
          s.phase = int(p.u64());
          return;
        }
        case Msg::bye:
          ranks_[size_t(r)].said_bye = true;
          if (r == 0) finish_by_ = Clock::now() + opt.heartbeat_timeout;
          return check_gathers_after_bye();
        default:
          return declare_failure("rank " + std::to_string(r) + " sent an unexpected " + msg_name(f.type) + " message");
      }
    } catch (const Error& e) {
      declare_failure("rank " + std::to_string(r) + " sent a malformed " + msg_name(f.type) + " message (" + e.what() +
                      ")");
    }
  }

  void answer_waiting_gets(const std::string& key) {
    const std::string& value = store_.at(key);
    std::vector<WaitingGet> answered;
    std::erase_if(waiting_gets_, [&](const WaitingGet& g) {
      if (g.key != key) return false;
      answered.push_back(g);
      return true;
    });
    for (const auto& g : answered) send_to(g.rank, Msg::value, PayloadWriter().u64(g.id).str(value).take());
  }

  // The n-th call of every rank makes the n-th result.
  void complete_gathers() {
    while (std::all_of(gather_queues_.begin(), gather_queues_.end(), [](const auto& q) { return !q.empty(); })) {
      std::vector<std::string> parts;
      for (auto& q : gather_queues_) {
        parts.push_back(std::move(q.front()));
        q.pop_front();
      }
      ++gathers_done_;
      const std::string payload = gathered_payload(parts);
      for (int r = 0; r < env.world_size && !over_; ++r) send_to(r, Msg::gathered, payload);
    }
  }

  // A rank that finished while others still wait in an all-gather will never join it.
  void check_gathers_after_bye() {
    std::vector<int> waiting;
    for (int r = 0; r < env.world_size; ++r)
      if (!gather_queues_[size_t(r)].empty()) waiting.push_back(r);
    if (waiting.empty()) return;
    for (int r = 0; r < env.world_size; ++r)
      if (ranks_[size_t(r)].said_bye && gather_queues_[size_t(r)].empty())
        return declare_failure("rank " + std::to_string(r) + " finished while rank(s) " + rank_list(waiting) +
                               " wait for it in all-gather #" + std::to_string(gathers_done_ + 1));
  }

  void send_to(int r, Msg type, std::string_view payload) {
    if (r == 0) {
      mailbox.deliver(Frame{type, std::string(payload)});
      return;
    }
    if (!connected(r)) return;
    // A rank that stops reading for heartbeat_timeout is as good as gone.
    if (!notify(r, type, payload, Clock::now() + opt.heartbeat_timeout)) lost(r);
  }

  bool notify(int r, Msg type, std::string_view payload, Clock::time_point deadline) {
    const std::string bytes = encode(type, payload);
    return net::write_all(ranks_[size_t(r)].fd.get(), bytes.data(), bytes.size(), deadline);
  }

  void lost(int r) {
    ranks_[size_t(r)].fd.reset();
    if (!ranks_[size_t(r)].said_bye)
      declare_failure("rank " + std::to_string(r) + " exited (its connection to rank 0 closed)");
  }

  void check_liveness(Clock::time_point now) {
    for (int r = 1; r < env.world_size && !over_; ++r) {
      const auto& s = ranks_[size_t(r)];
      if (connected(r) && !s.said_bye && now - s.last_heard > opt.heartbeat_timeout)
        declare_failure("rank " + std::to_string(r) + " stopped responding (no heartbeat for " +
                        seconds_text(now - s.last_heard) + " s)");
    }
  }

  // How long a rank may stay in its current phase (CoordinatorOptions).
  Clock::duration phase_limit(int phase) const {
    if (phase != 0) return opt.io_timeout;
    if (opt.step_timeout.count() > 0) return opt.step_timeout;
    const Clock::duration typical = step.longest_recent();
    if (typical == Clock::duration::zero()) return opt.first_step_timeout;
    return std::max<Clock::duration>(opt.min_step_timeout, 5 * typical);
  }

  // A rank longer in one step (or its validation/checkpoint) than allowed is named with every
  // other rank's last reported step.
  void check_steps(Clock::time_point now) {
    if (over_) return;
    const StepClock::Reading own = step.now();
    ranks_[0].step = own.step;
    ranks_[0].step_since = now - own.in_step;
    ranks_[0].phase = own.phase;
    int hung = -1;
    Clock::duration over{}, longest{}, limit{};
    for (int r = 0; r < env.world_size; ++r) {
      const auto& s = ranks_[size_t(r)];
      if (s.step < 0 || s.said_bye) continue;
      const Clock::duration in = now - s.step_since, allowed = phase_limit(s.phase);
      // (among ranks over their limit, the one furthest behind: the others wait for it)
      const bool behind = hung < 0 || s.step < ranks_[size_t(hung)].step;
      const bool same_step = hung >= 0 && s.step == ranks_[size_t(hung)].step;
      if (in > allowed && (behind || (same_step && in - allowed > over))) {
        over = in - allowed;
        longest = in;
        limit = allowed;
        hung = r;
      }
    }
    if (hung < 0) return;
    std::map<int64_t, std::vector<int>> others;
    std::vector<int> silent;
    for (int r = 0; r < env.world_size; ++r) {
      if (r == hung) continue;
      if (ranks_[size_t(r)].step < 0)
        silent.push_back(r);
      else
        others[ranks_[size_t(r)].step].push_back(r);
    }
    const bool io = ranks_[size_t(hung)].phase != 0;
    const int64_t at = ranks_[size_t(hung)].step;
    const std::string where = io && at == 0 ? "its setup (before step 1)"
                              : io          ? "the validation/checkpoint of step " + std::to_string(at)
                                            : "step " + std::to_string(at);
    std::string message = "rank " + std::to_string(hung) + " has been in " + where +
                          " for " + seconds_text(longest) + " s (" + (io ? "io timeout " : "step timeout ") +
                          seconds_text(limit) + " s)";
    for (const auto& [s, ranks] : others)
      message += "; rank" + std::string(ranks.size() > 1 ? "s " : " ") + rank_list(ranks) + " last reported step " +
                 std::to_string(s);
    if (!silent.empty()) message += "; rank(s) " + rank_list(silent) + " reported no step";
    declare_failure(message);
  }

  // After rank 0's own BYE: once every rank said goodbye (or heartbeat_timeout passed),
  // acknowledge and stop.
  void check_finish(Clock::time_point now) {
    if (over_ || !ranks_[0].said_bye) return;
    std::vector<int> missing;
    for (int r = 1; r < env.world_size; ++r)
      if (!ranks_[size_t(r)].said_bye) missing.push_back(r);
    if (!missing.empty() && now < finish_by_) return;
    std::string problem;
    if (!missing.empty())
      problem = "coordinator: rank(s) " + rank_list(missing) + " did not finish within " +
                seconds_text(opt.heartbeat_timeout) + " s of rank 0";
    for (int r = 1; r < env.world_size; ++r) {
      if (!connected(r)) continue;
      if (ranks_[size_t(r)].said_bye)
        notify(r, Msg::bye_ack, {}, now + kNoticeTimeout);
      else
        notify(r, Msg::failed, problem, now + kNoticeTimeout);
    }
    over_ = true;
    mailbox.finished(problem);
  }

  // Tells every rank still connected, then this process; the server thread stops.
  void declare_failure(const std::string& message) {
    if (over_) return;
    over_ = true;
    for (int r = 1; r < env.world_size; ++r)
      if (connected(r)) notify(r, Msg::failed, message, Clock::now() + kNoticeTimeout);
    report_failure(message);
  }

  struct WaitingGet {
    int rank;
    uint64_t id;
    std::string key;
  };

  // Set before the thread starts, then the server thread's alone (shutdown joins it first).
  net::Fd listener_;
  std::vector<RankState> ranks_;
  std::map<std::string, std::string> store_;
  std::vector<WaitingGet> waiting_gets_;
  std::vector<std::deque<std::string>> gather_queues_;
  int64_t gathers_done_ = 0;
  Clock::time_point finish_by_{};
  bool over_ = false;  // finished or failed: nothing more to serve

  std::mutex inbox_m_;
  std::deque<Frame> inbox_;
  net::WakePipe wake_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Coordinator::Impl> make_rank0(const DistEnv& env, const CoordinatorOptions& o,
                                              Coordinator::FailureHandler on_failure) {
  return std::make_unique<Rank0>(env, o, std::move(on_failure));
}

}  // namespace biofm::coord
