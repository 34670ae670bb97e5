#include "ragd/engine/constraint_matcher.h"

#include "ragd/common/check.h"

namespace ragd::engine {

ConstraintMatcher::ConstraintMatcher(std::shared_ptr<const CompiledConstraint> c, std::vector<int32_t> stop_ids)
    : c_(std::move(c)), stop_ids_(std::move(stop_ids)), states_{c_->start_state()} {}

TokenMask ConstraintMatcher::mask() {
  const int32_t s = states_.back();
  const bool strip = states_.size() == 1;
  auto m = failed_ ? Result<std::shared_ptr<const CompiledConstraint::Mask>>(Status::ResourceExhausted("failed"))
                   : c_->mask(s, strip);
  bool any = false;
  if (m.ok()) {
    grammar_mask_ = *m;
    for (uint64_t w : *grammar_mask_) any = any || w != 0;
  } else {
    failed_ = true;
  }
  const bool stops = failed_ || !any || c_->accepting(s);
  if (!stops) return TokenMask{*grammar_mask_};
  // Stop ids join the grammar's ids: the output is complete (or cannot go on).
  if (m.ok()) buf_ = *grammar_mask_;
  else buf_.assign((static_cast<size_t>(c_->vocabulary().size()) + 63) / 64, 0);
  if (!any && !c_->accepting(s)) failed_ = true;
  for (int32_t id : stop_ids_) {
    if (id < 0) continue;
    const size_t w = static_cast<size_t>(id) / 64;
    if (w >= buf_.size()) buf_.resize(w + 1, 0);
    buf_[w] |= uint64_t{1} << (static_cast<uint32_t>(id) % 64);
  }
  return TokenMask{buf_};
}

bool ConstraintMatcher::accept(int32_t token) {
  if (token < 0 || token >= c_->vocabulary().size()) return false;
  std::string_view b = c_->vocabulary().bytes(token);
  if (b.empty()) return false;
  if (states_.size() == 1) {
    size_t k = 0;
    while (k < b.size() && k < static_cast<size_t>(c_->vocabulary().leading_strip()) && b[k] == ' ') ++k;
    b.remove_prefix(k);
  }
  const int32_t t = c_->advance(states_.back(), b);
  if (t == CompiledConstraint::kRejected) return false;
  states_.push_back(t);
  return true;
}

bool ConstraintMatcher::accepting() const { return c_->accepting(states_.back()); }

bool ConstraintMatcher::complete() const {
  const int32_t s = states_.back();
  return c_->accepting(s) && !c_->can_continue(s);
}

void ConstraintMatcher::rollback(size_t n) {
  RAGD_CHECK(n <= num_accepted()) << "constraint rollback to " << n << " tokens of " << num_accepted();
  states_.resize(n + 1);
  failed_ = false;
}

}  // namespace ragd::engine
