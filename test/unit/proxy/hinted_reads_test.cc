#include "proxy/hinted_reads.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace sluice::proxy {
namespace {

struct Conn : HintedReads::Hook {
  explicit Conn(int id) : id(id) { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0); }
  ~Conn() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  int mine() const { return fds[0]; }
  void peer_sends() { EXPECT_EQ(::write(fds[1], "x", 1), 1); }
  void peer_shuts_down() { EXPECT_EQ(::shutdown(fds[1], SHUT_WR), 0); }
  void peer_closes() {
    ::close(fds[1]);
    fds[1] = -1;
  }
  int id;
  int fds[2] = {-1, -1};
};

std::vector<int> drained(HintedReads& set, std::size_t* reported = nullptr) {
  std::vector<int> ids;
  const std::size_t n =
      set.drain([&](HintedReads::Hook& h) { ids.push_back(static_cast<Conn&>(h).id); });
  if (reported) *reported = n;
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(HintedReads, AHintedReadIsHandedOverWhenThePeerClosesAndBytesWakeNothing) {
  HintedReads set;
  ASSERT_GE(set.fd(), 0);
  std::vector<std::unique_ptr<Conn>> c;
  for (int i = 0; i < 6; ++i) {
    c.push_back(std::make_unique<Conn>(i));
    ASSERT_TRUE(set.hint(*c.back(), c.back()->mine()));
    EXPECT_TRUE(c.back()->hinted());
  }
  std::size_t reported = 99;
  EXPECT_TRUE(drained(set, &reported).empty());
  EXPECT_EQ(reported, 0u);
  c[1]->peer_sends();  // bytes bring an event of their own: not reported here
  c[4]->peer_closes();
  EXPECT_EQ(drained(set, &reported), (std::vector<int>{4}));
  EXPECT_EQ(reported, 1u);
  EXPECT_FALSE(c[4]->hinted());
  EXPECT_TRUE(c[4]->peer_closed());
  EXPECT_TRUE(c[1]->hinted());
  // Reported once (edge triggered), however long the close stays there.
  EXPECT_TRUE(drained(set, &reported).empty());
  EXPECT_EQ(reported, 0u);
  // A half-close, and a close of a connection whose read is not hinted
  // (completed meanwhile): marked, not handed over.
  HintedReads::read_done(*c[0]);
  c[0]->peer_closes();
  c[5]->peer_shuts_down();
  EXPECT_EQ(drained(set, &reported), (std::vector<int>{5}));
  EXPECT_EQ(reported, 2u);
  EXPECT_TRUE(c[0]->peer_closed());
  // Once the close is known, the next hint is refused: the read must try
  // a receive, which sees the end at once.
  EXPECT_FALSE(set.hint(*c[0], c[0]->mine()));
  EXPECT_FALSE(set.hint(*c[4], c[4]->mine()));
  EXPECT_TRUE(set.hint(*c[1], c[1]->mine()));  // bytes only: hinted again
}

// The race the refusal covers: the close is reported before the read that
// took the last bytes gives its hint (both came in one loop round).
TEST(HintedReads, ACloseThereBeforeTheFirstHintIsReportedAtOnce) {
  HintedReads set;
  Conn a(0);
  a.peer_sends();
  a.peer_closes();
  ASSERT_TRUE(set.hint(a, a.mine()));  // registered now, the close already in
  EXPECT_EQ(drained(set), (std::vector<int>{0}));
}

// A connection destroyed leaves no registration behind; a descriptor number
// used again by another connection reports for that one only.
TEST(HintedReads, DestroyedAndReplacedConnectionsAreForgotten) {
  HintedReads set;
  auto a = std::make_unique<Conn>(0);
  Conn b(1);
  ASSERT_TRUE(set.hint(*a, a->mine()));
  ASSERT_TRUE(set.hint(b, b.mine()));
  a->peer_closes();
  a.reset();  // its hint never handed over: it is gone
  std::size_t reported = 99;
  EXPECT_TRUE(drained(set, &reported).empty());
  EXPECT_EQ(reported, 0u);
  // A descriptor closed under a live hook, its number then taken by another.
  Conn c(2);
  ASSERT_TRUE(set.hint(c, c.mine()));
  const int number = c.fds[0];
  ::close(c.fds[0]);
  c.fds[0] = -1;
  Conn d(3);
  if (d.fds[0] != number) {  // (the lowest free number usually is that one)
    ASSERT_EQ(::dup2(d.fds[0], number), number);
    ::close(d.fds[0]);
    d.fds[0] = number;
  }
  ASSERT_TRUE(set.hint(d, d.mine()));
  EXPECT_FALSE(c.registered());  // replaced
  d.peer_closes();
  EXPECT_EQ(drained(set), (std::vector<int>{3}));
  EXPECT_FALSE(c.peer_closed());
}

TEST(HintedReads, StoppingHandsOverEveryHintedReadAndRefusesMore) {
  HintedReads set;
  Conn a(0), b(1), c(2);
  ASSERT_TRUE(set.hint(a, a.mine()));
  ASSERT_TRUE(set.hint(b, b.mine()));
  ASSERT_TRUE(set.hint(c, c.mine()));
  HintedReads::read_done(b);
  std::vector<int> ids;
  set.stop([&](HintedReads::Hook& h) { ids.push_back(static_cast<Conn&>(h).id); });
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<int>{0, 2}));
  EXPECT_FALSE(a.hinted());
  EXPECT_FALSE(set.hint(a, a.mine()));
}

TEST(HintedReads, HooksOutlivingTheirSetAreNotRegistered) {
  Conn a(0);
  {
    HintedReads set;
    ASSERT_TRUE(set.hint(a, a.mine()));
    EXPECT_TRUE(a.registered());
  }
  EXPECT_FALSE(a.registered());
}

}  // namespace
}  // namespace sluice::proxy
