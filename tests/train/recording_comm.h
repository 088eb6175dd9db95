// A communicator for one process that records (operation, element count, root) instead of
// communicating: what tests of the data-parallel schedules compare between ranks and runs.
#pragma once
#include <string>
#include <vector>

#include "biofm/dist/comm.h"

namespace biofm::testkit {

class RecordingComm : public Communicator {
 public:
  RecordingComm(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string name() const override { return "recording"; }
  void all_reduce_sum(Tensor& t) override { calls.push_back({"all_reduce", t.numel(), -1}); }
  void reduce_sum(Tensor& t, int root) override { calls.push_back({"reduce", t.numel(), root}); }
  void broadcast(Tensor& t, int root) override { calls.push_back({"broadcast", t.numel(), root}); }
  void broadcast_from(const Tensor&, Tensor& dst, int root) override { calls.push_back({"broadcast", dst.numel(), root}); }
  void reduce_sum_to(const Tensor& src, Tensor&, int root) override { calls.push_back({"reduce", src.numel(), root}); }

  struct Call {
    std::string op;
    int64_t numel;
    int root;
    bool operator==(const Call&) const = default;
  };
  std::vector<Call> calls;

 private:
  int rank_, world_;
};

}  // namespace biofm::testkit
