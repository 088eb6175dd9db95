#include "biofm/data/rank_slice.h"

#include "biofm/core/error.h"

namespace biofm {

namespace {

class RankSlice : public BatchSource {
 public:
  RankSlice(std::unique_ptr<BatchSource> inner, int rank, int world, int per_step)
      : inner_(std::move(inner)), rank_(rank), world_(world), per_step_(per_step) {}

  Batch next() override {
    if (taken_ % per_step_ == 0) skip(int64_t(rank_) * per_step_);  // the lower ranks' batches
    Batch b = inner_->next();
    if (++taken_ % per_step_ == 0) skip(int64_t(world_ - 1 - rank_) * per_step_);  // the higher ranks'
    return b;
  }
  void skip() override {
    Batch ignored = next();
    (void)ignored;
  }
  uint64_t cursor() const override { return inner_->cursor(); }
  // (a step boundary: what checkpoints hold)
  void set_cursor(uint64_t c) override {
    inner_->set_cursor(c);
    taken_ = 0;
  }
  uint64_t epoch() const override { return inner_->epoch(); }
  uint64_t samples_per_epoch() const override { return inner_->samples_per_epoch(); }
  bool next_eval(Batch& b) override {
    for (;;) {
      if (!inner_->next_eval(b)) {
        eval_index_ = 0;
        return false;
      }
      if (eval_index_++ % world_ == rank_) return true;
    }
  }
  void reset_eval() override {
    inner_->reset_eval();
    eval_index_ = 0;
  }
  std::string summary() const override { return inner_->summary(); }

 private:
  void skip(int64_t n) {
    for (int64_t i = 0; i < n; ++i) inner_->skip();
  }

  std::unique_ptr<BatchSource> inner_;
  const int rank_, world_, per_step_;
  int64_t taken_ = 0;
  int64_t eval_index_ = 0;
};

}  // namespace

std::unique_ptr<BatchSource> slice_for_rank(std::unique_ptr<BatchSource> global, int rank, int world,
                                            int micro_per_step) {
  if (world < 1 || rank < 0 || rank >= world || micro_per_step < 1)
    fail("slice_for_rank: rank ", rank, " of ", world, " with ", micro_per_step, " micro batches per step");
  if (world == 1) return global;
  return std::make_unique<RankSlice>(std::move(global), rank, world, micro_per_step);
}

}  // namespace biofm
