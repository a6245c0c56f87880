// Hostile or broken files given to the binaries: each ends with a message
// naming the file, the line and what is wrong, or is skipped while sluice
// keeps serving; nothing hangs or reads without bound.
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "harness.h"

namespace sluice::test {
namespace {

constexpr const char* kHost = "127.0.0.1";

// Runs a binary that is expected to exit on its own; returns its exit code
// and what it wrote to stderr.
int run_to_exit(const std::vector<std::string>& argv, std::string* err) {
  Process::Options o;
  o.wait_for_listen = false;
  o.capture_stderr = true;
  auto p = Process::start(argv, o);
  if (!p) return -1;
  const int rc = p->wait(20000ms);
  *err = p->stderr_text();
  return rc;
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

// A host name that cannot resolve, decided on this machine: a label of 64
// bytes (DNS allows 63) is refused by the resolver library before any query
// goes out, so no test asks a DNS server outside loopback (a name such as
// does-not-exist.invalid would be sent to the host's resolver).
const std::string kUnresolvable = std::string(64, 'x') + ".invalid";

// A static endpoint that does not resolve stops sluice at startup with its
// entry named: the file, the entry's line and the host.
TEST(ConfigFiles, UnresolvableEndpointNamesFileLineAndHost) {
  TempFile cfg(
      "server:\n  listen: 127.0.0.1:0\n  threads: 1\n# the pool\nendpoints:\n"
      "  - address: 127.0.0.1:8000\n  - address: " +
      kUnresolvable + ":8000\n    engine: vllm\n");
  std::string err;
  const int rc =
      run_to_exit({SLUICE_BIN, "--config", cfg.path(), "--admin-listen", "127.0.0.1:0"}, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, -1) << "did not exit";
  EXPECT_NE(
      err.find(cfg.path() + ":7: endpoints[1].address: cannot resolve '" + kUnresolvable + "'"),
      std::string::npos)
      << err;
}

// A repeated key is an error (exit 2) naming the second one, not a silently
// ignored section.
TEST(ConfigFiles, DuplicateKeyExitsTwo) {
  TempFile cfg("server:\n  listen: 127.0.0.1:0\n  threads: 1\nserver:\n  threads: 2\n");
  std::string err;
  EXPECT_EQ(run_to_exit({SLUICE_BIN, "--config", cfg.path()}, &err), 2);
  EXPECT_NE(err.find(cfg.path() + ":4: server: duplicate key (first at line 1)"), std::string::npos)
      << err;
}

// A config that never ends is refused once past the limit.
TEST(ConfigFiles, EndlessConfigExitsTwo) {
  std::string err;
  EXPECT_EQ(run_to_exit({SLUICE_BIN, "--config", "/dev/zero"}, &err), 2);
  EXPECT_NE(err.find("/dev/zero: larger than 4 MiB"), std::string::npos) << err;
}

// An endpoints file listing a name that does not resolve next to good
// entries (addresses and a host name): the good ones join the pool, the bad
// one is logged once and skipped, and requests are served throughout.
// (Here the bad name fails at once; a lookup that hangs cannot be staged
// without changing the machine's resolver configuration.)
TEST(ConfigFiles, EndpointsFileWithUnresolvableNameAddsTheRest) {
  auto a = start_mock();
  auto b = start_mock();
  TempFile endpoints("endpoints:\n  - address: " + a->address() + "\n", "endpoints.yaml");
  TempFile cfg("server:\n  listen: 127.0.0.1:0\n  threads: 1\n  endpointsFile: " +
               endpoints.path() + "\n  endpointsFilePollInterval: 20ms\n");
  auto sluice = start_sluice(cfg, {}, /*capture_stderr=*/true);
  ASSERT_TRUE(sluice);
  HttpClient client(kHost, sluice->port());
  HttpClient admin(kHost, sluice->admin_port());
  auto r = client.post_json("/v1/completions", completion_body(1));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-gateway-destination-endpoint-served"), a->address());

  // The bad name first: it must not keep the others out. `localhost:PORT`
  // goes through a real lookup (it is another entry for mock A).
  const std::string by_name = "localhost:" + std::to_string(a->port());
  write_file_atomically(endpoints.path(), "endpoints:\n  - address: " + kUnresolvable +
                                              ":8000\n"
                                              "  - address: " +
                                              by_name + "\n  - address: " + b->address() +
                                              "\n  - address: " + a->address() + "\n");
  EXPECT_TRUE(eventually(
      [&] {
        auto r = client.post_json("/v1/completions", completion_body(1));
        EXPECT_EQ(r.status, 200) << r.body;
        return r.header("x-gateway-destination-endpoint-served") == b->address();
      },
      10000ms));
  auto live = [&] {
    std::set<std::string> out;
    auto r = admin.request("GET", "/admin/v1/endpoints");
    auto list = nlohmann::json::parse(r.body, nullptr, false);
    if (!list.is_array()) return out;
    for (const auto& e : list)
      if (!e["removed"].get<bool>()) out.insert(e["address"].get<std::string>());
    return out;
  };
  EXPECT_TRUE(eventually([&] { return live().count(by_name) == 1; })) << by_name;
  EXPECT_EQ(live(), (std::set<std::string>{a->address(), b->address(), by_name}));
  EXPECT_TRUE(eventually([&] {
    return sluice->stderr_now().find("cannot resolve " + kUnresolvable + ":8000") !=
           std::string::npos;
  }));
  // Both mocks keep serving.
  bool a_seen = false, b_seen = false;
  for (int i = 0; i < 40 && !(a_seen && b_seen); ++i) {
    auto r = client.post_json("/v1/completions", completion_body(1));
    ASSERT_EQ(r.status, 200) << r.body;
    const auto to = r.header("x-gateway-destination-endpoint-served");
    a_seen = a_seen || to == a->address() || to == by_name;
    b_seen = b_seen || to == b->address();
  }
  EXPECT_TRUE(a_seen && b_seen);
  EXPECT_EQ(sluice->stop(), 0);
  // Logged once for the one change, not at every poll.
  const auto& log = sluice->stderr_text();
  const auto first = log.find("cannot resolve " + kUnresolvable + ":8000");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("cannot resolve " + kUnresolvable + ":8000", first + 1), std::string::npos)
      << log;
}

// sluice-load's scenario files get the same check for repeated keys.
TEST(ConfigFiles, ScenarioDuplicateKeyExitsTwo) {
  TempFile scenario(
      "duration: 1s\nflows:\n  - name: a\n    arrival: {type: poisson, rate: 1}\n"
      "    arrival: {type: poisson, rate: 2}\n",
      "scenario.yaml");
  std::string err;
  EXPECT_EQ(
      run_to_exit(
          {SLUICE_LOAD_BIN, "--scenario", scenario.path(), "--target", "http://127.0.0.1:1"}, &err),
      2);
  EXPECT_NE(err.find(scenario.path() + ": flows[0].arrival (line 5): duplicate key (first at "
                                       "line 4)"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace sluice::test
