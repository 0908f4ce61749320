// StopMatcher and utf8_complete_prefix_len: stops inside one token and across tokens, several
// stops, hold-back of partial matches and of split UTF-8 characters, flush and reset.
#include "runtime/stop.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nexus/core/rng.h"

namespace nexus {
namespace {

// Feeds `tokens` in order and returns what was emitted, whether a stop hit, and which.
struct Streamed {
  std::string out;
  std::vector<std::string> chunks;
  bool stopped = false;
  int stop_index = -1;
};
Streamed feed_all(StopMatcher& m, const std::vector<std::string>& tokens,
                  bool flush_at_end = true) {
  Streamed r;
  for (const std::string& t : tokens) {
    StopResult s = m.feed(t);
    r.out += s.text;
    r.chunks.emplace_back(s.text);
    if (s.stopped) {
      r.stopped = true;
      r.stop_index = s.stop_index;
      return r;
    }
  }
  if (flush_at_end) {
    StopResult s = m.flush();
    r.out += s.text;
    r.chunks.emplace_back(s.text);
  }
  return r;
}

TEST(Utf8, CompletePrefixLen) {
  EXPECT_EQ(utf8_complete_prefix_len(""), 0u);
  EXPECT_EQ(utf8_complete_prefix_len("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix_len("a\xC3"), 1u);                 // é cut after its lead
  EXPECT_EQ(utf8_complete_prefix_len("a\xC3\xA9"), 3u);             // é complete
  EXPECT_EQ(utf8_complete_prefix_len("\xE2\x82"), 0u);              // € missing one byte
  EXPECT_EQ(utf8_complete_prefix_len("\xE2\x82\xAC"), 3u);          // € complete
  EXPECT_EQ(utf8_complete_prefix_len("x\xF0\x9F\x98"), 1u);         // 😀 missing one byte
  EXPECT_EQ(utf8_complete_prefix_len("x\xF0\x9F\x98\x80"), 5u);     // 😀 complete
  EXPECT_EQ(utf8_complete_prefix_len("a\x80"), 2u);                 // stray continuation
  EXPECT_EQ(utf8_complete_prefix_len("\x80\x80\x80\x80\x80"), 5u);  // nothing to wait for
  EXPECT_EQ(utf8_complete_prefix_len("a\xFF"), 2u);                 // never valid
}

TEST(StopMatcher, NoStopsPassesTextThrough) {
  StopMatcher m;
  Streamed r = feed_all(m, {"Hello", ", ", "world"});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.chunks, (std::vector<std::string>{"Hello", ", ", "world", ""}));
}

TEST(StopMatcher, StopInsideOneToken) {
  StopMatcher m({"END"});
  Streamed r = feed_all(m, {"ab", "cENDxyz", "more"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 0);
  EXPECT_EQ(r.out, "abc");
  EXPECT_TRUE(m.stopped());
  StopResult after = m.feed("again");
  EXPECT_TRUE(after.stopped);
  EXPECT_TRUE(after.text.empty());
}

TEST(StopMatcher, StopAcrossTokensIsHeldBack) {
  StopMatcher m({"</s>"});
  StopResult a = m.feed("Hello <");
  EXPECT_EQ(a.text, "Hello ");
  EXPECT_EQ(m.held(), 1u);
  StopResult b = m.feed("/");
  EXPECT_EQ(b.text, "");
  EXPECT_EQ(m.held(), 2u);
  StopResult c = m.feed("s>tail");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(c.text, "");
}

TEST(StopMatcher, FalsePartialMatchIsReleased) {
  StopMatcher m({"</s>"});
  EXPECT_EQ(m.feed("Hello <").text, "Hello ");
  StopResult b = m.feed("b>");
  EXPECT_FALSE(b.stopped);
  EXPECT_EQ(b.text, "<b>");
  EXPECT_EQ(m.held(), 0u);
}

TEST(StopMatcher, SelfOverlappingStop) {
  // "aab" inside "aaab": the tail "aa" stays a candidate while the first "a" is released.
  StopMatcher m({"aab"});
  Streamed r = feed_all(m, {"a", "a", "a", "b"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.chunks, (std::vector<std::string>{"", "", "a", ""}));
}

TEST(StopMatcher, MultipleStops) {
  StopMatcher m({"###", "\nUser:"});
  Streamed r = feed_all(m, {"foo\nUs", "er: hi"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 1);
  EXPECT_EQ(r.out, "foo");
  EXPECT_EQ(r.chunks[0], "foo");  // "\nUs" held back

  StopMatcher m2({"###", "\nUser:"});
  Streamed r2 = feed_all(m2, {"x#", "#", "#y"});
  EXPECT_TRUE(r2.stopped);
  EXPECT_EQ(r2.stop_index, 0);
  EXPECT_EQ(r2.out, "x");
}

TEST(StopMatcher, EarliestMatchWinsThenListOrder) {
  StopMatcher m({"bc", "ab"});
  StopResult r = m.feed("xabc");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop_index, 1);
  EXPECT_EQ(r.text, "x");
  StopMatcher same_start({"abc", "ab", ""});
  EXPECT_EQ(same_start.stops().size(), 2u);  // the empty stop is ignored
  StopResult s = same_start.feed("zabcd");
  EXPECT_EQ(s.stop_index, 0);
  EXPECT_EQ(s.text, "z");
}

TEST(StopMatcher, Utf8IsHeldBackUntilComplete) {
  StopMatcher m;
  // "café 😀": é split after its lead byte, the emoji split over three tokens.
  Streamed r = feed_all(m, {"caf\xC3", "\xA9 \xF0", "\x9F", "\x98\x80!"});
  EXPECT_EQ(r.chunks, (std::vector<std::string>{"caf", "\xC3\xA9 ", "", "\xF0\x9F\x98\x80!", ""}));
  // Both hold-backs at once: a partial stop after a partial character.
  StopMatcher s({"\xC3\xA9nd"});  // "énd"
  EXPECT_EQ(s.feed("ok\xC3").text, "ok");
  StopResult b = s.feed("\xA9n");
  EXPECT_EQ(b.text, "");
  EXPECT_TRUE(s.feed("d").stopped);
}

TEST(StopMatcher, FlushReturnsHeldTextAndResetClears) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.feed("abc ST").text, "abc ");
  StopResult f = m.flush();
  EXPECT_FALSE(f.stopped);
  EXPECT_EQ(f.text, "ST");
  EXPECT_EQ(m.held(), 0u);

  EXPECT_TRUE(m.feed("xSTOP").stopped);
  EXPECT_TRUE(m.flush().stopped);
  m.reset();
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.feed("STO").text, "");
  EXPECT_EQ(m.feed("RM").text, "STORM");
}

TEST(StopMatcher, RandomSplitsMatchWholeTextSearch) {
  // Any split of the text into tokens gives the same output as searching the whole text, and no
  // emitted chunk ends inside a UTF-8 character.
  const std::string text = "Grüße, 世界! <|end|> then more <|im_end|> text \xF0\x9F\x98\x80";
  const std::vector<std::string> stops = {"<|im_end|>", "<|end|>", "never"};
  Xoshiro256 gen(5);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::string> tokens;
    for (size_t i = 0; i < text.size();) {
      const size_t len = 1 + gen.next_u64() % 6;
      tokens.push_back(text.substr(i, len));
      i += len;
    }
    StopMatcher m(stops);
    Streamed r = feed_all(m, tokens);
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(r.stop_index, 1);
    EXPECT_EQ(r.out, text.substr(0, text.find("<|end|>")));
    for (const std::string& c : r.chunks) EXPECT_EQ(utf8_complete_prefix_len(c), c.size());

    StopMatcher plain;  // no stops: everything comes out, in whole characters
    Streamed all = feed_all(plain, tokens);
    EXPECT_EQ(all.out, text);
    for (const std::string& c : all.chunks) EXPECT_EQ(utf8_complete_prefix_len(c), c.size());
  }
}

}  // namespace
}  // namespace nexus
