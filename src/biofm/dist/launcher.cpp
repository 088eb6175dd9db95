#include "biofm/dist/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "biofm/core/error.h"

namespace biofm {

namespace {

volatile sig_atomic_t g_forward_signal = 0;
void on_signal(int sig) { g_forward_signal = sig; }

}  // namespace

int launch_local(const LaunchOptions& o, const std::string& exe, const std::vector<std::string>& command) {
  const int world = o.nnodes * o.nproc_per_node;
  std::vector<pid_t> pids(size_t(o.nproc_per_node), -1);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);  // Slurm's preemption warning (--signal=USR1@T)
  // An ignored SIGCHLD (inherited from whoever started us) would make the kernel reap the
  // children itself, and waitpid would never report them.
  ::signal(SIGCHLD, SIG_DFL);
  auto stop_started = [&](int sig) {
    for (pid_t p : pids)
      if (p > 0) ::kill(p, sig);
  };
  const pid_t launcher = ::getpid();
  for (int local = 0; local < o.nproc_per_node; ++local) {
    const int rank = o.node_rank * o.nproc_per_node + local;
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      stop_started(SIGKILL);  // the ranks started so far would wait for the others forever
      for (pid_t p : pids)
        if (p > 0) ::waitpid(p, nullptr, 0);
      fail("launch: fork failed for local rank ", local, ": ", std::strerror(err));
    }
    if (pid == 0) {
      // Should the launcher die without passing a stop on (SIGKILL, an OOM kill), its ranks get
      // SIGTERM: they finish the step with a checkpoint and exit instead of training on orphaned.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != launcher) ::raise(SIGTERM);  // (it died before the prctl)
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node).c_str(), 1);
      ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(o.master_port).c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(exe.c_str())};
      for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(exe.c_str(), argv.data());
      std::fprintf(stderr, "launch: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    pids[size_t(local)] = pid;
  }
  int running = o.nproc_per_node, code = 0, failed_rank = -1, stopped_by = 0, code_after_stop = 0;
  auto stop_all = stop_started;
  auto stop_deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    if (g_forward_signal) {
      // A requested stop: pass it on and wait. Training ranks finish the step and write a
      // checkpoint, however long that takes (a rank that dies or hangs meanwhile is the
      // coordinator's to report); a second signal, passed on too, makes them exit at once.
      // (A rank that got the same signal straight from the process group takes the two as one.)
      stopped_by = g_forward_signal;
      stop_all(g_forward_signal);
      g_forward_signal = 0;
    }
    // Every process that has ended since the last look. A rank killed by a signal goes first:
    // the others it takes down (they exit 1 when its connection closes) may end within the
    // same 20 ms, or even before it (below), and waitpid hands out the lowest rank first; the
    // failure named is the cause.
    std::vector<std::pair<pid_t, int>> ended;
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == ECHILD && ended.empty())
        fail("launch: lost track of the ", running, " running process(es)");
      if (pid <= 0) break;
      ended.emplace_back(pid, status);
    }
    if (ended.empty()) {
      if (std::chrono::steady_clock::now() > stop_deadline) {
        stop_all(SIGKILL);
        stop_deadline = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    // A rank that exits with an error may have been the first to notice another's death: a rank
    // killed by a signal closes its connections before the kernel reports it ended (its memory is
    // torn down in between, slow on a loaded machine). Before naming a failure, give such a death
    // a moment to show.
    const auto killed = [](const auto& e) { return WIFSIGNALED(e.second); };
    const auto exited_with_error = [](const auto& e) { return WIFEXITED(e.second) && WEXITSTATUS(e.second) != 0; };
    if (failed_rank < 0 && stopped_by == 0 && std::none_of(ended.begin(), ended.end(), killed) &&
        std::any_of(ended.begin(), ended.end(), exited_with_error)) {
      for (int i = 0; i < 75 && int(ended.size()) < running && std::none_of(ended.begin(), ended.end(), killed); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        int status = 0;
        for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) ended.emplace_back(pid, status);
      }
    }
    std::stable_partition(ended.begin(), ended.end(), killed);
    for (const auto& [pid, status] : ended) {
      for (int local = 0; local < o.nproc_per_node; ++local) {
        if (pids[size_t(local)] != pid) continue;
        pids[size_t(local)] = -1;
        --running;
        const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (rc != 0 && stopped_by != 0 && code_after_stop == 0) {
          // A rank that failed while stopping: the others cannot complete the checkpoint without
          // it; give them the grace period to notice, as after any failure.
          code_after_stop = rc;
          stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.grace_seconds);
        }
        if (rc != 0 && failed_rank < 0 && stopped_by == 0) {
          failed_rank = o.node_rank * o.nproc_per_node + local;
          code = rc;
          // A rank that exits with an error is the first to end, not necessarily the cause: rank 0
          // also exits 1 when it finds another rank dead or frozen (its error line names that rank).
          std::fprintf(stderr, "launch: rank %d %s %d%s; stopping the other %d process(es)\n", failed_rank,
                       WIFEXITED(status) ? "exited with code" : "was killed by signal",
                       WIFEXITED(status) ? rc : WTERMSIG(status),
                       WIFEXITED(status) ? ", the first to end (its error above names the cause, which may be another "
                                           "rank)"
                                         : "",
                       running);
          stop_all(SIGTERM);
          stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.grace_seconds);
        }
      }
    }
  }
  if (stopped_by != 0 && failed_rank < 0) {
    // A stop signal is passed on; processes that handle it (train: checkpoint, exit 0) and all
    // end cleanly make a clean stop, as with one process.
    std::fprintf(stderr, "launch: stopped by signal %d; all %d process(es) ended%s\n", stopped_by, o.nproc_per_node,
                 code_after_stop == 0 ? " cleanly" : "");
    return code_after_stop;
  }
  return code;
}

}  // namespace biofm
