#include "serve/stop_matcher.h"

#include <gtest/gtest.h>

namespace hf2pte::serve {
namespace {

/// Feeds `pieces` one by one; returns everything emitted (flush included when no match).
std::string run(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.feed(p);
  return out + m.flush();
}

TEST(StopMatcher, MatchesAcrossPieces) {
  StopMatcher m({"\n\nUser:"});
  EXPECT_EQ(m.feed("Hello"), "Hello");
  EXPECT_EQ(m.feed(" there\n"), " there");  // "\n" may start the stop string: held
  EXPECT_EQ(m.feed("\nUs"), "");
  EXPECT_EQ(m.feed("er: hi"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.feed("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, HeldTextIsReleasedWhenItStopsMatching) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.feed("the EN"), "the ");
  EXPECT_EQ(m.feed("D"), "");
  EXPECT_TRUE(m.matched());
  StopMatcher n({"END"});
  EXPECT_EQ(run(n, {"the EN", "ergy"}), "the ENergy");
  EXPECT_FALSE(n.matched());
  StopMatcher tail({"END"});
  EXPECT_EQ(run(tail, {"ab", "E"}), "abE");  // generation ended: the held tail is text
}

TEST(StopMatcher, EarliestOfSeveralWinsAndEmptyIsIgnored) {
  StopMatcher m({"", "cd", "b"});
  EXPECT_EQ(m.feed("abcd"), "a");
  EXPECT_TRUE(m.matched());
  StopMatcher none({});
  EXPECT_EQ(run(none, {"x", "y"}), "xy");
}

TEST(StopMatcher, StopInsideOnePiece) {
  StopMatcher m({"."});
  EXPECT_EQ(m.feed("One. Two."), "One");
}

}  // namespace
}  // namespace hf2pte::serve
