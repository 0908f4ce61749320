// DecodeSchedule: learns the cycle of a decode step's matmul groups from the groups as they run,
// predicts the next one, learns again when a group comes out of order, and does nothing when off.
#include "ops/decode_schedule.h"

#include <gtest/gtest.h>

#include <vector>

#include "nexus/status.h"

namespace nexus {
namespace {

struct Groups {
  // Tensors only as distinct addresses: the schedule never reads them.
  std::vector<Tensor> t = std::vector<Tensor>(8);
  const DecodeSchedule::Group* run(DecodeSchedule& s, int i, int count = 1) {
    const Tensor* w[2] = {&t[static_cast<size_t>(i)], &t[7]};
    return s.ran(w, count);
  }
  const Tensor* first(const DecodeSchedule::Group* g) const { return g ? g->w[0] : nullptr; }
};

TEST(DecodeSchedule, LearnsTheCycleAndPredictsTheNextGroup) {
  Groups g;
  DecodeSchedule s;
  // First step: A, B (a group of two), C; nothing is known yet.
  EXPECT_EQ(g.run(s, 0), nullptr);
  EXPECT_EQ(g.run(s, 1, 2), nullptr);
  EXPECT_EQ(g.run(s, 2), nullptr);
  EXPECT_EQ(s.cycle_length(), 0u);
  // A again closes the cycle.
  for (int step = 0; step < 3; ++step) {
    const DecodeSchedule::Group* after_a = g.run(s, 0);
    ASSERT_NE(after_a, nullptr);
    EXPECT_EQ(after_a->w[0], &g.t[1]);
    EXPECT_EQ(after_a->count, 2);
    EXPECT_EQ(after_a->w[1], &g.t[7]);
    EXPECT_EQ(g.first(g.run(s, 1, 2)), &g.t[2]);
    EXPECT_EQ(g.first(g.run(s, 2)), &g.t[0]);  // the last group predicts the next step's first
    EXPECT_EQ(s.cycle_length(), 3u);
  }
}

TEST(DecodeSchedule, AGroupOutOfOrderStartsLearningAgain) {
  Groups g;
  DecodeSchedule s;
  for (int i : {0, 1, 2, 0}) g.run(s, i);
  ASSERT_EQ(s.cycle_length(), 3u);
  // After A, B was expected; D comes instead (another path through the model).
  EXPECT_EQ(g.run(s, 3), nullptr);
  EXPECT_EQ(s.cycle_length(), 0u);
  EXPECT_EQ(g.run(s, 4), nullptr);
  EXPECT_EQ(g.first(g.run(s, 3)), &g.t[4]);
  EXPECT_EQ(s.cycle_length(), 2u);
  // The same weight as a group of another size is another group.
  EXPECT_EQ(g.run(s, 4, 2), nullptr);
  EXPECT_EQ(s.cycle_length(), 0u);
}

TEST(DecodeSchedule, LearningThatStartedMidStepStartsAgainAtTheRepeat) {
  Groups g;
  DecodeSchedule s;
  // Steps are A B C; learning starts at B. When B comes round it is the first recorded group, so
  // the cycle closes as B C A.
  for (int i : {1, 2, 0}) EXPECT_EQ(g.run(s, i), nullptr);
  EXPECT_EQ(g.first(g.run(s, 1)), &g.t[2]);
  EXPECT_EQ(s.cycle_length(), 3u);
  // D E F, then E: recorded, but not first, so learning starts again from E.
  DecodeSchedule t;
  for (int i : {3, 4, 5}) EXPECT_EQ(g.run(t, i), nullptr);
  EXPECT_EQ(g.run(t, 4), nullptr);
  EXPECT_EQ(g.run(t, 5), nullptr);
  EXPECT_EQ(g.first(g.run(t, 4)), &g.t[5]);
  EXPECT_EQ(t.cycle_length(), 2u);
}

TEST(DecodeSchedule, OffPredictsNothingAndBadGroupsAreRefused) {
  Groups g;
  DecodeSchedule off(false);
  for (int r = 0; r < 3; ++r)
    for (int i : {0, 1, 2}) EXPECT_EQ(g.run(off, i), nullptr);
  EXPECT_EQ(off.cycle_length(), 0u);
  DecodeSchedule s;
  const Tensor* w[5] = {};
  EXPECT_THROW(s.ran(w, 0), Error);
  EXPECT_THROW(s.ran(w, 5), Error);
}

}  // namespace
}  // namespace nexus
