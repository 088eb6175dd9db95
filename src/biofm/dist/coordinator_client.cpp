// A rank other than 0: connects to rank 0, then one background thread reads its replies and
// failure notices, sends this rank's heartbeats and notices when rank 0 goes quiet or away.
#include <poll.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "biofm/core/error.h"
#include "biofm/dist/coordinator_impl.h"

namespace biofm::coord {

namespace {

class Client final : public Coordinator::Impl {
 public:
  Client(const DistEnv& e, const CoordinatorOptions& o, Coordinator::FailureHandler h) : Impl(e, o, std::move(h)) {
    join(Clock::now() + opt.connect_timeout);
    thread_ = std::thread([this] { run(); });
  }
  ~Client() override { shutdown(); }

  void set(const std::string& key, const std::string& value) override {
    send(Msg::set, PayloadWriter().str(key).str(value).take());
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    const uint64_t id = mailbox.new_request_id();
    send(Msg::get, PayloadWriter().u64(id).str(key).take());
    return mailbox.wait_value(id, key, env.rank, Clock::now() + timeout);
  }

  std::vector<std::string> all_gather(const std::string& mine) override {
    send(Msg::gather, mine);
    return mailbox.wait_gathered();
  }

  // Rank 0 acknowledges once every rank said goodbye; it gives up after heartbeat_timeout.
  // Not acknowledged in time is no error here: rank 0 has our BYE and will not count our
  // closing connection as a failure.
  void finish() override {
    std::string problem;
    if (!failed() && write(Msg::bye, {}))
      mailbox.wait_finished(Clock::now() + opt.heartbeat_timeout + std::chrono::seconds(5), problem);
    shutdown();
  }

  void shutdown() noexcept override {
    stop_ = true;
    wake_.wake();
    if (thread_.joinable()) thread_.join();
    fd_.reset();
  }

 private:
  std::string where() const { return net::where(env.master_addr, env.master_port); }
  std::string me() const { return "coordinator: rank " + std::to_string(env.rank); }

  // Connects (rank 0 may not listen yet: retried until the deadline), says hello and waits
  // until rank 0 says every rank has arrived.
  void join(Clock::time_point deadline) {
    for (;;) {
      try {
        fd_ = net::connect_to(env.master_addr, env.master_port, deadline);
      } catch (const Error& e) {
        fail(me(), ": MASTER_ADDR: ", e.what());
      }
      if (fd_.valid()) break;
      if (net::ms_left(deadline) == 0)
        fail(me(), " could not reach rank 0 at ", where(), " within ", seconds_text(opt.connect_timeout),
             " s: ", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, net::ms_left(deadline))));
    }
    const std::string hello = encode(Msg::hello, hello_payload(env.rank, env.world_size));
    if (!net::write_all(fd_.get(), hello.data(), hello.size(), deadline))
      fail(me(), " reached rank 0 at ", where(), " but could not say hello");
    Frame f;
    switch (read_frame(fd_.get(), in_, f, deadline)) {
      case ReadResult::frame:
        if (f.type == Msg::welcome) return;
        if (f.type == Msg::failed) fail(f.payload);
        fail(me(), ": rank 0 at ", where(), " answered hello with ", msg_name(f.type));
      case ReadResult::closed:
        fail(me(), ": rank 0 at ", where(), " closed the connection before every rank arrived");
      case ReadResult::timeout:
        fail(me(), " reached rank 0 at ", where(), " but not every rank arrived within ",
             seconds_text(opt.connect_timeout), " s");
    }
  }

  // One whole frame at a time from either thread; false when the connection is gone.
  bool write(Msg type, std::string_view payload) {
    const std::string bytes = encode(type, payload);
    std::lock_guard lock(write_m_);
    return net::write_all(fd_.get(), bytes.data(), bytes.size(), Clock::now() + opt.heartbeat_timeout);
  }

  void send(Msg type, std::string_view payload) {
    if (write(type, payload)) return;
    if (auto failure = mailbox.failure()) fail(*failure);
    fail(me(), " lost its connection to rank 0 at ", where());
  }

  // The background thread.
  void run() {
    auto last_heard = Clock::now();
    auto next_heartbeat = last_heard;
    while (!stop_) {
      pollfd fds[2] = {{wake_.read_fd(), POLLIN, 0}, {fd_.get(), POLLIN, 0}};
      ::poll(fds, 2, net::ms_left(next_heartbeat));
      if (fds[0].revents != 0) wake_.drain();
      if (fds[1].revents != 0) {
        const bool alive = pump(fd_.get(), in_);
        try {
          while (auto f = in_.next()) {
            last_heard = Clock::now();
            if (!handle(*f)) return;
          }
        } catch (const Error& e) {
          return report_failure("rank " + std::to_string(env.rank) + " cannot read rank 0's messages (" + e.what() + ")");
        }
        if (!alive) return report_failure("rank 0 exited (the connection to rank 0 closed)");
      }
      const auto now = Clock::now();
      if (now >= next_heartbeat) {
        if (!heartbeats_paused) {
          const StepClock::Reading s = step.now();
          const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(s.in_step).count();
          write(Msg::heartbeat, PayloadWriter().u64(uint64_t(s.step)).u64(uint64_t(ms)).u64(uint64_t(s.phase)).take());
        }
        next_heartbeat = now + opt.heartbeat_interval;
      }
      if (now - last_heard > opt.heartbeat_timeout)
        return report_failure("rank 0 stopped responding (no heartbeat for " + seconds_text(now - last_heard) + " s)");
    }
  }

  // False when nothing more will come: the goodbye was acknowledged, or the run failed.
  bool handle(const Frame& f) {
    switch (f.type) {
      case Msg::heartbeat:
        return true;
      case Msg::failed:
        report_failure(f.payload);
        return false;
      case Msg::value:
      case Msg::gathered:
        mailbox.deliver(f);
        return true;
      case Msg::bye_ack:
        mailbox.deliver(f);
        return false;
      default:
        report_failure("rank 0 sent an unexpected " + std::string(msg_name(f.type)) + " message");
        return false;
    }
  }

  net::Fd fd_;     // set before the thread starts; closed after it stopped
  FrameBuffer in_;  // the background thread's (the constructor's before it)
  std::mutex write_m_;
  net::WakePipe wake_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Coordinator::Impl> make_client(const DistEnv& env, const CoordinatorOptions& o,
                                               Coordinator::FailureHandler on_failure) {
  return std::make_unique<Client>(env, o, std::move(on_failure));
}

}  // namespace biofm::coord
