// The fleet's Redis connection against a real redis-server (Debian's, started
// here on a unix socket in a fresh directory): pipelined replies of every
// type, AUTH by password and by ACL user, a missing or wrong password, a server killed
// and restarted, a server that never answers, one that is not there.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fleet/redis_connection.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/requires.h"

namespace sluice::fleet {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::Process;
using test::redis_server_bin;
using test::RedisServer;
using test::TempDir;

class FleetRedis : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE(redis_server_bin(), "redis-server", ::sluice::test::kRedisPackage);
    signal(SIGPIPE, SIG_IGN);  // as sluice's main: a write to a gone server is an error
  }
  RedisAddress address(const std::string& socket, const std::string& password = "") {
    RedisAddress a;
    a.unix_socket = socket;
    a.password = password;
    return a;
  }
  TempDir dir_;
};

TEST_F(FleetRedis, PipelinesCommandsAndCopiesEveryReplyType) {
  RedisServer server(dir_.path);
  ASSERT_TRUE(server.start());
  RedisConnection c(address(server.socket()));
  const std::string binary("a\0b\xff", 4);
  auto r = c.pipeline({{"SET", "k", binary},
                       {"GET", "k"},
                       {"INCRBY", "n", "5"},
                       {"GET", "missing"},
                       {"RPUSH", "l", "x", "y"},
                       {"LRANGE", "l", "0", "-1"},
                       {"NOSUCHCOMMAND"},
                       {"INCRBY", "n", "2"}});
  ASSERT_TRUE(r) << c.error();
  ASSERT_EQ(r->size(), 8u);
  EXPECT_EQ((*r)[0].type, RedisReply::Type::kStatus);
  EXPECT_EQ((*r)[0].str, "OK");
  EXPECT_EQ((*r)[1].type, RedisReply::Type::kString);
  EXPECT_EQ((*r)[1].str, binary);  // binary-safe both ways
  EXPECT_EQ((*r)[2].type, RedisReply::Type::kInteger);
  EXPECT_EQ((*r)[2].integer, 5);
  EXPECT_EQ((*r)[3].type, RedisReply::Type::kNil);
  EXPECT_EQ((*r)[4].integer, 2);
  ASSERT_EQ((*r)[5].type, RedisReply::Type::kArray);
  ASSERT_EQ((*r)[5].elements.size(), 2u);
  EXPECT_EQ((*r)[5].elements[1].str, "y");
  // A refused command is its own error reply; the batch goes on.
  EXPECT_TRUE((*r)[6].is_error());
  EXPECT_NE((*r)[6].str.find("unknown command"), std::string::npos) << (*r)[6].str;
  EXPECT_EQ((*r)[7].integer, 7);
  EXPECT_EQ(c.connects(), 1u);
}

TEST_F(FleetRedis, PasswordAclUserAndAWrongPassword) {
  RedisServer server(dir_.path, "s3cret");
  ASSERT_TRUE(server.start());

  RedisConnection admin(address(server.socket(), "s3cret"));
  auto r =
      admin.pipeline({{"ACL", "SETUSER", "sluice", "on", ">replica-pw", "~sluice:*", "+@all"}});
  ASSERT_TRUE(r) << admin.error();
  ASSERT_FALSE((*r)[0].is_error()) << (*r)[0].str;

  RedisAddress user = address(server.socket(), "replica-pw");
  user.user = "sluice";
  RedisConnection as_user(user);
  r = as_user.pipeline({{"SET", "sluice:a", "1"}, {"SET", "other:a", "1"}});
  ASSERT_TRUE(r) << as_user.error();
  EXPECT_FALSE((*r)[0].is_error()) << (*r)[0].str;
  EXPECT_TRUE((*r)[1].is_error());  // outside the user's key pattern
  EXPECT_NE((*r)[1].str.find("NOPERM"), std::string::npos) << (*r)[1].str;
}

// A server that requires a password sluice lacks (or does not take) is an
// error naming the authentication failure and the setting to fix, not the
// "Server closed the connection" Redis 7 causes by closing an
// unauthenticated connection at its first command of more than 10 arguments.
TEST_F(FleetRedis, AMissingOrWrongPasswordIsNamedAtConnect) {
  RedisServer server(dir_.path, "x");
  ASSERT_TRUE(server.start());

  RedisConnection none(address(server.socket()));
  EXPECT_FALSE(none.ensure_connected());
  EXPECT_FALSE(none.connected());
  EXPECT_NE(none.error().find("NOAUTH"), std::string::npos) << none.error();
  EXPECT_NE(none.error().find("redis.passwordFile"), std::string::npos) << none.error();
  EXPECT_NE(none.error().find(server.socket()), std::string::npos) << none.error();
  // A batch as the fleet sends it (an HSET of more than 10 arguments).
  std::vector<std::string> hset = {"HSET", "h"};
  for (int i = 0; i < 10; ++i) hset.insert(hset.end(), {"f" + std::to_string(i), "v"});
  EXPECT_FALSE(none.pipeline({{"MULTI"}, hset, {"EXEC"}}));
  EXPECT_NE(none.error().find("NOAUTH"), std::string::npos) << none.error();
  EXPECT_EQ(none.error().find("closed the connection"), std::string::npos) << none.error();

  RedisConnection wrong(address(server.socket(), "guess"));
  EXPECT_FALSE(wrong.ensure_connected());
  EXPECT_FALSE(wrong.connected());
  EXPECT_NE(wrong.error().find("AUTH refused"), std::string::npos) << wrong.error();
  EXPECT_NE(wrong.error().find("WRONGPASS"), std::string::npos) << wrong.error();
  EXPECT_NE(wrong.error().find("redis.passwordFile"), std::string::npos) << wrong.error();
  EXPECT_NE(wrong.error().find(server.socket()), std::string::npos) << wrong.error();
  EXPECT_FALSE(wrong.pipeline({{"PING"}}));  // and it stays refused

  RedisConnection right(address(server.socket(), "x"));
  auto r = right.pipeline({{"PING"}});
  ASSERT_TRUE(r) << right.error();
  EXPECT_EQ((*r)[0].str, "PONG");
}

TEST_F(FleetRedis, AKilledServerIsOneFailedCallThenAReconnect) {
  RedisServer server(dir_.path);
  ASSERT_TRUE(server.start());
  RedisConnection c(address(server.socket()));
  ASSERT_TRUE(c.pipeline({{"SET", "k", "v"}}));
  server.kill();

  auto t0 = Clock::now();
  EXPECT_FALSE(c.pipeline({{"GET", "k"}}));
  EXPECT_FALSE(c.connected());
  EXPECT_FALSE(c.pipeline({{"GET", "k"}}));  // nobody there: cannot connect
  EXPECT_NE(c.error().find("cannot connect"), std::string::npos) << c.error();
  EXPECT_LT(Clock::now() - t0, 5s);  // bounded by the timeout, not hung

  RedisServer again(dir_.path);
  ASSERT_TRUE(again.start());
  auto r = c.pipeline({{"GET", "k"}});
  ASSERT_TRUE(r) << c.error();
  EXPECT_EQ((*r)[0].type, RedisReply::Type::kNil);  // a fresh server: nothing kept
  EXPECT_EQ(c.connects(), 2u);
}

TEST_F(FleetRedis, AServerThatNeverAnswersCostsOneTimeout) {
  // A listener that accepts (the kernel's backlog) and never reads or replies.
  const std::string path = dir_.path + "/silent.sock";
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  path.copy(sa.sun_path, sizeof sa.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(listen(fd, 4), 0);

  RedisAddress a = address(path);
  a.timeout = 100ms;
  RedisConnection c(a);
  auto t0 = Clock::now();
  EXPECT_FALSE(c.pipeline({{"PING"}}));
  auto took = Clock::now() - t0;
  EXPECT_FALSE(c.connected());
  EXPECT_NE(c.error().find("no reply"), std::string::npos) << c.error();
  EXPECT_GE(took, 90ms);  // it did wait for the answer (a hang is ctest's timeout)
  close(fd);
}

TEST_F(FleetRedis, NoServerIsAClearErrorNamingTheAddress) {
  RedisConnection c(address(dir_.path + "/nobody.sock"));
  EXPECT_FALSE(c.ensure_connected());
  EXPECT_NE(c.error().find(dir_.path + "/nobody.sock"), std::string::npos) << c.error();
  EXPECT_NE(c.error().find("cannot connect"), std::string::npos) << c.error();

  RedisAddress tcp;
  tcp.host = "127.0.0.1";
  tcp.port = 1;  // nothing listens on port 1 here
  RedisConnection t(tcp);
  EXPECT_FALSE(t.ensure_connected());
  EXPECT_NE(t.error().find("127.0.0.1:1"), std::string::npos) << t.error();
}

}  // namespace
}  // namespace sluice::fleet
