// sluice-ctl's reading of admin answers, without a socket: well-formed
// answers print as they always did, and anything else a server may answer
// gives an exit code and a message naming what it got, never an exception
// (issue 33: valid JSON of another shape used to abort with SIGABRT).
#include "tools/ctl/ctl_answers.h"

#include <gtest/gtest.h>

#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sluice::ctl {
namespace {

constexpr Command kAllCommands[] = {
    Command::kFlows,       Command::kFlow,      Command::kFlowSet,    Command::kFlowReset,
    Command::kBands,       Command::kBandSet,   Command::kBandDelete, Command::kEndpoints,
    Command::kReload,      Command::kDrain,     Command::kDrainWait,  Command::kDrainStatus,
    Command::kDrainCancel, Command::kKeys,      Command::kKey,        Command::kKeyCreate,
    Command::kKeyDisable,  Command::kKeyEnable, Command::kKeyRevoke,  Command::kQuotas,
    Command::kQuotaReset,  Command::kMetrics};
static_assert(std::size(kAllCommands) == kCommandCount);

Request request(Command c, bool as_json = false) {
  std::string subject;
  if (c == Command::kFlow || c == Command::kFlowSet || c == Command::kFlowReset)
    subject = "tenant-a";
  if (c == Command::kBandSet || c == Command::kBandDelete) subject = "10";
  if (c == Command::kKey || c == Command::kKeyDisable || c == Command::kKeyEnable ||
      c == Command::kKeyRevoke)
    subject = "key_ops";
  return {c, subject, as_json};
}

Outcome read(Command c, std::string_view body, int status = 200, bool as_json = false) {
  return read_answer(request(c, as_json), status, body);
}

// An unreadable answer: exit 4, nothing on stdout, one line on stderr.
void expect_unreadable(const Outcome& o, const std::string& err) {
  EXPECT_EQ(o.exit_code, kExitUnreadable) << o.out << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, err);
}

// Every message is whole lines a terminal cannot be steered by.
void expect_safe_lines(const std::string& err) {
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.back(), '\n');
  std::size_t start = 0;
  while (start < err.size()) {
    const std::size_t end = err.find('\n', start);
    const std::string line = err.substr(start, end - start);
    EXPECT_EQ(line.rfind("sluice-ctl: ", 0), 0u) << line;
    EXPECT_LE(line.size(), 2048u) << line.substr(0, 100);
    for (unsigned char c : line) EXPECT_TRUE(c >= 0x20 && c != 0x7f) << line;
    start = end + 1;
  }
}

const char* kFlowsAnswer =
    R"([{"id":"tenant-a","priority":10,"band":10,"weight":1.0,"queued":0,"queuedBytes":0,)"
    R"("inFlight":2,"dispatched":120,"completed":118,)"
    R"("outcomes":{"evicted-ttl":3,"rejected-capacity":1},"tokensCharged":300.5,)"
    R"("lastActiveMsAgo":12.5},)"
    R"({"id":"tenant-b","priority":0,"band":0,"weight":2.5,"queued":4,"queuedBytes":4096,)"
    R"("inFlight":0,"dispatched":7,"outcomes":{},"tokensCharged":0.0,)"
    R"("lastActiveMsAgo":1234567.0}])";

const char* kBandsAnswer =
    R"([{"priority":0,"configured":false,"maxBytes":0,"maxRequests":0,)"
    R"("fairnessPolicy":"global-strict-fairness-policy","orderingPolicy":"fcfs-ordering-policy",)"
    R"("antiStarvationShare":0.0,"queued":0,"queuedBytes":0,"flows":2,"backloggedFlows":0},)"
    R"({"priority":10,"configured":true,"maxBytes":1048576,"maxRequests":40,)"
    R"("fairnessPolicy":"round-robin-fairness-policy","orderingPolicy":"fcfs-ordering-policy",)"
    R"("antiStarvationShare":0.1,"queued":3,"queuedBytes":300,"flows":1,"backloggedFlows":1,)"
    R"("ceiling":0.5}])";

const char* kEndpointsAnswer =
    R"([{"address":"127.0.0.1:8000","engine":"vllm","labels":{"zone":"a","gpu":"h100"},)"
    R"("removed":false,"healthy":true,"inFlight":3,)"
    R"("metrics":{"waiting":1,"running":4,"kvCacheUsage":0.25,"ageMs":37.4}},)"
    R"({"address":"127.0.0.1:8001","engine":"sglang","labels":{},"removed":false,)"
    R"("healthy":false,"inFlight":0,"metrics":null},)"
    R"({"address":"10.0.0.3:8000","engine":"vllm","labels":{"zone":"b"},"removed":true,)"
    R"("healthy":false,"inFlight":1,)"
    R"("metrics":{"waiting":0,"running":0,"kvCacheUsage":0.0,"ageMs":2000.0}}])";

// --- Well-formed answers: the output of the sluice-ctl before the fix. ---

TEST(CtlAnswers, FlowsTable) {
  const auto o = read(Command::kFlows, kFlowsAnswer);
  EXPECT_EQ(o.exit_code, kExitDone);
  EXPECT_EQ(o.err, "");
  EXPECT_EQ(o.out,
            "ID        PRIORITY  BAND  WEIGHT  QUEUED  BYTES  IN-FLIGHT  DISPATCHED  "
            "REJECTED/EVICTED                   TOKENS  LAST-ACTIVE\n"
            "tenant-a  10        10    1       0       0      2          120         "
            "evicted-ttl=3,rejected-capacity=1  300.5   0.0s\n"
            "tenant-b  0         0     2.5     4       4096   0          7           "
            "-                                  0       1234.6s\n");
  EXPECT_EQ(read(Command::kFlows, "[]").out,
            "ID  PRIORITY  BAND  WEIGHT  QUEUED  BYTES  IN-FLIGHT  DISPATCHED  REJECTED/EVICTED  "
            "TOKENS  LAST-ACTIVE\n");
}

TEST(CtlAnswers, OneFlowAndItsOverride) {
  const auto o =
      read(Command::kFlow,
           R"({"id":"tenant-a","override":{"weight":3.0,"priority":10},"flows":[{"id":"tenant-a",)"
           R"("priority":10,"band":10,"weight":3.0,"queued":1,"queuedBytes":10,"inFlight":0,)"
           R"("dispatched":5,"outcomes":{},"tokensCharged":12,"lastActiveMsAgo":250}]})");
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.out,
            "flow tenant-a  override: {\"priority\":10,\"weight\":3.0}\n"
            "ID        PRIORITY  BAND  WEIGHT  QUEUED  BYTES  IN-FLIGHT  DISPATCHED  "
            "REJECTED/EVICTED  TOKENS  LAST-ACTIVE\n"
            "tenant-a  10        10    3       1       10     0          5           "
            "-                 12      0.2s\n");
}

TEST(CtlAnswers, ChangesSayWhatWasDone) {
  auto o = read(Command::kFlowSet,
                R"({"id":"tenant-a","override":{"weight":3.0,"priority":10,"maxQueued":50},)"
                R"("flows":[]})");
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.out, "flow tenant-a override: {\"maxQueued\":50,\"priority\":10,\"weight\":3.0}\n");
  o = read(Command::kFlowReset, R"({"id":"tenant-a","override":{},"flows":[]})");
  EXPECT_EQ(o.out, "flow tenant-a: overrides removed\n");
  o = read(Command::kBandSet,
           R"({"priority":10,"configured":true,"maxRequests":40,"antiStarvationShare":0.1})");
  EXPECT_EQ(
      o.out,
      "band 10: "
      "{\"antiStarvationShare\":0.1,\"configured\":true,\"maxRequests\":40,\"priority\":10}\n");
  o = read(Command::kBandDelete, R"({"priority":10,"removed":true})");
  EXPECT_EQ(o.out, "band 10: reverted to the default band\n");
  EXPECT_EQ(o.err, "");
}

TEST(CtlAnswers, BandsTable) {
  const auto o = read(Command::kBands, kBandsAnswer);
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.out,
            "PRIORITY  SOURCE      MAX-REQUESTS  MAX-BYTES  FAIRNESS                       "
            "ORDERING              SHARE  QUEUED  BYTES  FLOWS\n"
            "0         default     0             0          global-strict-fairness-policy  "
            "fcfs-ordering-policy  0      0       0      2\n"
            "10        configured  40            1048576    round-robin-fairness-policy    "
            "fcfs-ordering-policy  0.1    3       300    1\n");
}

TEST(CtlAnswers, EndpointsTable) {
  const auto o = read(Command::kEndpoints, kEndpointsAnswer);
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.out,
            "ADDRESS         ENGINE  HEALTH   WAITING  RUNNING  KV-CACHE  METRICS-AGE  IN-FLIGHT  "
            "LABELS\n"
            "127.0.0.1:8000  vllm    healthy  1        4        0.25      37ms         3          "
            "gpu=h100,zone=a\n"
            "127.0.0.1:8001  sglang  down     -        -        -         -            0          "
            "-\n"
            "10.0.0.3:8000   vllm    removed  0        0        0         2000ms       1          "
            "zone=b\n");
}

TEST(CtlAnswers, ReloadLines) {
  EXPECT_EQ(
      read(Command::kReload, R"({"status":"reloaded","applied":[],"restartRequired":[]})").out,
      "reloaded; nothing changed\n");
  EXPECT_EQ(read(Command::kReload, R"({"status":"reloaded","applied":["flowControl","endpoints"],)"
                                   R"("restartRequired":["server.listen"]})")
                .out,
            "reloaded; applied: [\"flowControl\",\"endpoints\"]\n"
            "changed but needs a restart: [\"server.listen\"]\n");
}

TEST(CtlAnswers, DrainStatesAndWaiting) {
  EXPECT_EQ(read(Command::kDrainStatus, R"({"state":"serving","queued":0,"inFlight":0})").out,
            "serving: 0 queued, 0 in flight\n");
  EXPECT_EQ(read(Command::kDrainCancel, R"({"state":"serving","queued":5,"inFlight":1})").out,
            "serving: 5 queued, 1 in flight\n");
  // POST answers 202 while draining; drain --wait polls on that state.
  auto d =
      read_drain(request(Command::kDrain), 202, R"({"state":"draining","queued":3,"inFlight":2})");
  EXPECT_EQ(d.outcome.exit_code, kExitDone);
  EXPECT_EQ(d.state, "draining");
  EXPECT_EQ(d.counts, "3 queued, 2 in flight");
  d = read_drain(request(Command::kDrainWait), 200,
                 R"({"state":"drained","queued":0,"inFlight":0})");
  EXPECT_EQ(d.state, "drained");
  EXPECT_EQ(d.outcome.out, "drained: 0 queued, 0 in flight\n");
  // Only the POST may answer 202.
  d = read_drain(request(Command::kDrainWait), 202, R"({"state":"draining"})");
  EXPECT_EQ(d.outcome.exit_code, kExitRefused);
  EXPECT_EQ(d.state, "");
}

TEST(CtlAnswers, JsonIsTheAnswerIndented) {
  EXPECT_EQ(
      read(Command::kDrainStatus, R"({"state":"serving","queued":0,"inFlight":0})", 200, true).out,
      "{\n  \"inFlight\": 0,\n  \"queued\": 0,\n  \"state\": \"serving\"\n}\n");
  EXPECT_EQ(read(Command::kFlows, "[]", 200, true).out, "[]\n");
  const auto o = read(Command::kEndpoints, kEndpointsAnswer, 200, true);
  EXPECT_EQ(o.exit_code, kExitDone);
  EXPECT_EQ(o.out.rfind("[\n  {\n    \"address\": \"127.0.0.1:8000\"", 0), 0u) << o.out;
}

TEST(CtlAnswers, MetricsAsTheyCame) {
  const std::string text = "# HELP x y\nx{flow=\"\\x01\"} 1\n";
  EXPECT_EQ(read(Command::kMetrics, text).out, text);
  EXPECT_EQ(read(Command::kMetrics, "[]").out, "[]");
  EXPECT_EQ(read(Command::kMetrics, "nope", 503).exit_code, kExitRefused);
}

const char* kKeysAnswer =
    R"([{"id":"key_ab12cd34","tenant":"acme","prefix":"sk-sluice-Ab3x","disabled":false,)"
    R"("source":"admin","expires":"2027-01-01T00:00:00Z"},)"
    R"({"id":"ops-1","tenant":"beta","prefix":"","disabled":true,"source":"file",)"
    R"("expires":null}])";

const char* kKeyCreated =
    R"({"id":"key_ab12cd34","tenant":"acme","prefix":"sk-sluice-Ab3x","disabled":false,)"
    R"("source":"admin","expires":null,)"
    R"("key":"sk-sluice-Ab3xQ9_zK-0123456789abcdefghijABCDEFGHIJklmnopq"})";

TEST(CtlAnswers, KeysTableNeverHoldsAKey) {
  auto o = read(Command::kKeys, kKeysAnswer);
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.err, "");
  EXPECT_EQ(o.out,
            "ID            TENANT  PREFIX          EXPIRES               STATE     SOURCE\n"
            "key_ab12cd34  acme    sk-sluice-Ab3x  2027-01-01T00:00:00Z  enabled   admin\n"
            "ops-1         beta    -               -                     disabled  file\n");
  EXPECT_EQ(read(Command::kKeys, "[]").out, "ID  TENANT  PREFIX  EXPIRES  STATE  SOURCE\n");
  o = read(Command::kKey,
           R"({"id":"key_ops","tenant":"acme","prefix":"sk-sluice-Zz9a","disabled":true,)"
           R"("source":"admin","expires":"2030-06-01T12:00:00Z"})");
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.out,
            "ID       TENANT  PREFIX          EXPIRES               STATE     SOURCE\n"
            "key_ops  acme    sk-sluice-Zz9a  2030-06-01T12:00:00Z  disabled  admin\n");
  EXPECT_EQ(read(Command::kKeys, "[]", 200, true).out, "[]\n");
}

TEST(CtlAnswers, KeyCreatePrintsTheKeyAloneAndSaysItIsShownOnce) {
  const std::string key = "sk-sluice-Ab3xQ9_zK-0123456789abcdefghijABCDEFGHIJklmnopq";
  auto o = read(Command::kKeyCreate, kKeyCreated, 201);
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  // stdout is the key and its newline, so $(sluice-ctl key create ...) is the key.
  EXPECT_EQ(o.out, key + "\n");
  EXPECT_EQ(o.err,
            "sluice-ctl: key key_ab12cd34 for tenant acme (sk-sluice-Ab3x...): store it now, it "
            "is not shown again\n");
  // --json: the whole answer, key included; the same line on stderr.
  o = read(Command::kKeyCreate, kKeyCreated, 201, true);
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.out.rfind("{\n  \"disabled\": false,\n  \"expires\": null,\n  \"id\": "
                        "\"key_ab12cd34\",\n  \"key\": \"" +
                            key + "\",\n",
                        0),
            0u)
      << o.out;
  EXPECT_NE(o.err.find("store it now"), std::string::npos);
  // No prefix in the answer: the line says so by leaving it out.
  o = read(Command::kKeyCreate, R"({"id":"k","tenant":"t","key":"sk-sluice-x"})", 201);
  EXPECT_EQ(o.out, "sk-sluice-x\n");
  EXPECT_EQ(o.err, "sluice-ctl: key k for tenant t: store it now, it is not shown again\n");
  // 201 is create's status only.
  for (Command c : kAllCommands) {
    if (c == Command::kKeyCreate) continue;
    EXPECT_EQ(read(c, "{}", 201).exit_code, kExitRefused) << command_name(request(c));
  }
  EXPECT_EQ(read(Command::kKeyCreate, kKeyCreated, 202).exit_code, kExitRefused);
}

TEST(CtlAnswers, KeyChangesSayWhatWasDone) {
  const char* record = R"({"id":"key_ops","tenant":"acme","prefix":"sk-sluice-Zz9a",)"
                       R"("source":"admin","expires":null,"disabled":)";
  auto o = read(Command::kKeyDisable, std::string(record) + "true}");
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.out, "key key_ops: disabled\n");
  EXPECT_EQ(o.err, "");
  // What the answer says the key is now.
  EXPECT_EQ(read(Command::kKeyEnable, std::string(record) + "false}").out,
            "key key_ops: enabled\n");
  EXPECT_EQ(read(Command::kKeyRevoke, R"({"id":"key_ops","revoked":true})").out,
            "key key_ops: revoked\n");
  EXPECT_EQ(read(Command::kKeyRevoke, R"({"id":"key_ops","revoked":true})", 200, true).out,
            "{\n  \"id\": \"key_ops\",\n  \"revoked\": true\n}\n");
}

TEST(CtlAnswers, KeyRefusals) {
  auto o = read(Command::kKeyRevoke,
                R"({"error":{"code":"unknown-key","message":"no key 'key_ops' this replica may )"
                R"(revoke"}})",
                404);
  EXPECT_EQ(o.exit_code, kExitRefused);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "sluice-ctl: 404 unknown-key: no key 'key_ops' this replica may revoke\n");
  o = read(Command::kKeyCreate,
           R"({"error":{"code":"key-exists","message":"a key with id 'key_ops' exists"}})", 409);
  EXPECT_EQ(o.exit_code, kExitRefused);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "sluice-ctl: 409 key-exists: a key with id 'key_ops' exists\n");
  EXPECT_EQ(read(Command::kKeyCreate,
                 R"({"error":{"code":"invalid-tenant","message":"tenant must be a string"}})", 400)
                .err,
            "sluice-ctl: 400 invalid-tenant: tenant must be a string\n");
  EXPECT_EQ(
      read(Command::kKey, R"({"error":{"code":"unknown-key","message":"no key 'x'"}})", 404).err,
      "sluice-ctl: 404 unknown-key: no key 'x'\n");
  EXPECT_EQ(read(Command::kKeyDisable, "<html>bad gateway</html>", 502).err,
            "sluice-ctl: 502: <html>bad gateway</html>\n");
  o = read(Command::kKeys, R"({"error":{"code":"unauthorized","message":"needs a token"}})", 401);
  EXPECT_EQ(o.exit_code, kExitRefused);
  EXPECT_NE(o.err.find("--token-file"), std::string::npos) << o.err;
}

TEST(CtlAnswers, KeyAnswersOfAnotherShape) {
  struct Case {
    Command command;
    int status;
    const char* body;
    const char* err;
  };
  const Case cases[] = {
      {Command::kKeys, 200, R"({"keys":[]})",
       "keys: expected a JSON array, got an object: {\"keys\":[]}"},
      {Command::kKeys, 200, "[1]", "keys: .[0]: expected a JSON object, got a number: 1"},
      {Command::kKeys, 200, R"([{"id":"a","disabled":"no"}])",
       "keys: .[0].disabled: expected a boolean, got a string: \"no\""},
      {Command::kKeys, 200, R"([{"id":"a"}])",
       "keys: .[0].disabled: expected a boolean, got nothing (no such field)"},
      {Command::kKeys, 200, R"([{"id":5,"disabled":false}])",
       "keys: .[0].id: expected a string, got a number: 5"},
      {Command::kKeys, 200, R"([{"id":"a","disabled":false,"expires":1700000000}])",
       "keys: .[0].expires: expected a string, got a number: 1700000000"},
      {Command::kKey, 200, "[]", "key key_ops: expected a JSON object, got an array: []"},
      {Command::kKey, 200, R"({"id":"key_ops","tenant":["acme"],"disabled":false})",
       "key key_ops: .tenant: expected a string, got an array: [\"acme\"]"},
      // A 201 without the key, or with something else where the key is.
      {Command::kKeyCreate, 201, R"({"id":"key_ops","tenant":"acme","prefix":"sk-sluice-Ab3x"})",
       "key create: .key: expected a string, got nothing (no such field)"},
      {Command::kKeyCreate, 201, R"({"id":"key_ops","key":null})",
       "key create: .key: expected a string, got null"},
      {Command::kKeyCreate, 201, R"({"id":"key_ops","key":42})",
       "key create: .key: expected a string, got a number: 42"},
      {Command::kKeyCreate, 201, "[]", "key create: expected a JSON object, got an array: []"},
      {Command::kKeyCreate, 201, "", "key create: expected a JSON object, got an empty answer"},
      {Command::kKeyCreate, 201, R"({"id":7,"key":"sk-sluice-x"})",
       "key create: .id: expected a string, got a number: 7"},
      {Command::kKeyDisable, 200, "[]",
       "key disable key_ops: expected a JSON object, got an array: []"},
      {Command::kKeyDisable, 200, R"({"id":"key_ops"})",
       "key disable key_ops: .disabled: expected a boolean, got nothing (no such field)"},
      {Command::kKeyEnable, 200, R"({"id":"key_ops","disabled":"false"})",
       "key enable key_ops: .disabled: expected a boolean, got a string: \"false\""},
      {Command::kKeyRevoke, 200, "true",
       "key revoke key_ops: expected a JSON object, got a boolean: true"},
  };
  for (const auto& c : cases) {
    for (bool as_json : {false, true}) {
      SCOPED_TRACE(std::string(c.body) + (as_json ? " --json" : ""));
      expect_unreadable(read(c.command, c.body, c.status, as_json),
                        std::string("sluice-ctl: ") + c.err + "\n");
    }
  }
}

// The key is the one value printed as it came: one that a terminal would
// obey, or that $(...) would not capture whole, is not printed at all, in
// either mode, and the message does not quote it.
TEST(CtlAnswers, AKeyThatIsNotPrintableAsciiIsNeverPrinted) {
  for (const std::string& key :
       {std::string("sk-sluice-\\u001b[2Jgotcha"), std::string("sk-sluice-a\\nb"),
        std::string("sk-sluice-a b"), std::string("sk-sluice-\\u0000"),
        std::string("sk-sluice-\\u007f"), std::string("sk-sluice-\\u009b31m"),
        std::string("sk-sluice-caf\xc3\xa9"), std::string("sk-sluice-\\u202e")}) {
    for (bool as_json : {false, true}) {
      SCOPED_TRACE(key + (as_json ? " --json" : ""));
      const auto o = read(Command::kKeyCreate,
                          R"({"id":"k","tenant":"t","prefix":"sk-sluice-x","key":")" + key + "\"}",
                          201, as_json);
      EXPECT_EQ(o.exit_code, kExitUnreadable);
      EXPECT_EQ(o.out, "");
      EXPECT_EQ(o.err.rfind("sluice-ctl: key create: .key: expected printable ASCII without "
                            "spaces, got a string of ",
                            0),
                0u)
          << o.err;
      EXPECT_NE(o.err.find(" bytes with others (not shown)\n"), std::string::npos) << o.err;
      EXPECT_EQ(o.err.find("sk-sluice"), std::string::npos) << o.err;
      expect_safe_lines(o.err);
    }
  }
  expect_unreadable(read(Command::kKeyCreate, R"({"id":"k","key":""})", 201),
                    "sluice-ctl: key create: .key: expected printable ASCII without spaces, got "
                    "an empty string\n");
  // What the note quotes of the answer is escaped and cut short.
  const auto o = read(Command::kKeyCreate,
                      R"({"id":"k\u001b[31m","tenant":")" + std::string(5000, 'a') +
                          R"(","prefix":"sk-sluice-\u0007","key":"sk-sluice-x"})",
                      201);
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.out, "sk-sluice-x\n");
  EXPECT_EQ(o.err.rfind("sluice-ctl: key k\\x1b[31m for tenant aaaa", 0), 0u) << o.err;
  EXPECT_NE(o.err.find("... (5000 bytes) (sk-sluice-\\x07...): store it now"), std::string::npos)
      << o.err;
  expect_safe_lines(o.err);
}

// --- Refusals: exit 1 with the server's words, whatever the body is. ---

TEST(CtlAnswers, RefusalsPrintTheServersMessage) {
  auto o = read(
      Command::kFlowSet,
      R"({"error":{"code":"invalid-field","message":"weight must be a number greater than 0"}})",
      400);
  EXPECT_EQ(o.exit_code, kExitRefused);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "sluice-ctl: 400 invalid-field: weight must be a number greater than 0\n");
  o = read(Command::kFlows, R"({"error":{"code":"unauthorized","message":"needs a token"}})", 401);
  EXPECT_EQ(o.err,
            "sluice-ctl: 401 unauthorized: needs a token\n"
            "sluice-ctl: give the admin token with --token-file FILE or SLUICE_ADMIN_TOKEN\n");
  EXPECT_EQ(read(Command::kBands, "<html>bad gateway</html>", 502).err,
            "sluice-ctl: 502: <html>bad gateway</html>\n");
  EXPECT_EQ(read(Command::kBands, R"({"error":{"code":"x"}})", 500).err,
            "sluice-ctl: 500 x: {\"error\":{\"code\":\"x\"}}\n");
}

TEST(CtlAnswers, RefusalsOfAnyShapeDoNotAbort) {
  // Each of these reached value() on a non-object or a non-string.
  for (const char* body : {R"({"error":5})", R"({"error":[]})", R"({"error":{"message":7}})",
                           R"({"error":{"code":[1],"message":"m"}})", "[]", "null", "\"x\""}) {
    for (Command c : kAllCommands) {
      const auto o = read(c, body, 400);
      EXPECT_EQ(o.exit_code, kExitRefused) << body;
      expect_safe_lines(o.err);
    }
  }
  EXPECT_EQ(read(Command::kReload, R"({"error":5})", 400).err, "sluice-ctl: 400: {\"error\":5}\n");
  EXPECT_EQ(read(Command::kReload, R"({"error":{"code":[1],"message":"m"}})", 400).err,
            "sluice-ctl: 400: m\n");
  // Control bytes are escaped and a long message is cut.
  EXPECT_EQ(read(Command::kReload, "a\x1b[2Jb\n", 500).err, "sluice-ctl: 500: a\\x1b[2Jb\\n\n");
  const auto o = read(Command::kReload, std::string(100000, 'x'), 500);
  EXPECT_NE(o.err.find("... (100000 bytes)"), std::string::npos);
  EXPECT_LT(o.err.size(), 1200u);
}

// --- Answers of another shape: exit 4 naming what came instead. ---

TEST(CtlAnswers, TopLevelOfAnotherShape) {
  expect_unreadable(read(Command::kDrainStatus, "[]"),
                    "sluice-ctl: drain status: expected a JSON object, got an array: []\n");
  expect_unreadable(read(Command::kFlow, "[]"),
                    "sluice-ctl: flow tenant-a: expected a JSON object, got an array: []\n");
  expect_unreadable(read(Command::kFlowSet, "[]"),
                    "sluice-ctl: flow set tenant-a: expected a JSON object, got an array: []\n");
  expect_unreadable(read(Command::kReload, "[]"),
                    "sluice-ctl: reload: expected a JSON object, got an array: []\n");
  expect_unreadable(read(Command::kDrain, "[]"),
                    "sluice-ctl: drain: expected a JSON object, got an array: []\n");
  expect_unreadable(read(Command::kDrainWait, "[]"),
                    "sluice-ctl: drain --wait: expected a JSON object, got an array: []\n");
  expect_unreadable(read(Command::kFlows, "{\"flows\":5}"),
                    "sluice-ctl: flows: expected a JSON array, got an object: {\"flows\":5}\n");
  expect_unreadable(read(Command::kBands, "\"x\""),
                    "sluice-ctl: bands: expected a JSON array, got a string: \"x\"\n");
  expect_unreadable(read(Command::kEndpoints, "null"),
                    "sluice-ctl: endpoints: expected a JSON array, got null\n");
  expect_unreadable(read(Command::kBandSet, "5"),
                    "sluice-ctl: band set 10: expected a JSON object, got a number: 5\n");
  expect_unreadable(read(Command::kBandDelete, "true"),
                    "sluice-ctl: band delete 10: expected a JSON object, got a boolean: true\n");
  expect_unreadable(read(Command::kFlowReset, "[1]"),
                    "sluice-ctl: flow reset tenant-a: expected a JSON object, got an array: [1]\n");
  expect_unreadable(read(Command::kDrainCancel, "\"x\""),
                    "sluice-ctl: drain cancel: expected a JSON object, got a string: \"x\"\n");
}

// Every command that reads JSON, every kind of value at the top: an answer
// or exit 4 with one safe line, in table and --json mode alike.
TEST(CtlAnswers, EveryCommandEveryTopLevelValue) {
  const std::vector<std::string> bodies = {"[]",    "\"x\"",         "null",
                                           "5",     "-1.5e300",      "true",
                                           "{}",    "{\"flows\":5}", "{\"flows\":[1,2]}",
                                           "[1,2]", "[{}]",          "[null]",
                                           "[[]]",  "{\"state\":[]}"};
  for (Command c : kAllCommands) {
    if (c == Command::kMetrics) continue;
    for (const auto& body : bodies) {
      for (bool as_json : {false, true}) {
        const auto o = read(c, body, 200, as_json);
        SCOPED_TRACE(command_name(request(c)) + " <- " + body);
        if (o.exit_code == kExitDone) {
          EXPECT_EQ(o.err, "");
          EXPECT_FALSE(o.out.empty());
        } else {
          EXPECT_EQ(o.exit_code, kExitUnreadable);
          EXPECT_EQ(o.out, "");
          EXPECT_EQ(o.err.rfind("sluice-ctl: " + command_name(request(c)) + ": ", 0), 0u) << o.err;
          EXPECT_NE(o.err.find("expected a "), std::string::npos) << o.err;
          expect_safe_lines(o.err);
        }
      }
    }
  }
  // Those that read nothing from an object accept any object; lists may be empty.
  EXPECT_EQ(read(Command::kFlowReset, "{}").exit_code, kExitDone);
  EXPECT_EQ(read(Command::kBandDelete, "{\"flows\":5}").exit_code, kExitDone);
  EXPECT_EQ(read(Command::kBandSet, "{}").out, "band 10: {}\n");
  EXPECT_EQ(read(Command::kBands, "[]").exit_code, kExitDone);
  EXPECT_EQ(read(Command::kEndpoints, "[]").exit_code, kExitDone);
}

TEST(CtlAnswers, ListsOfAnotherShape) {
  // A flow's answer with its flows as something else.
  expect_unreadable(read(Command::kFlow, R"({"id":"tenant-a","override":{},"flows":5})"),
                    "sluice-ctl: flow tenant-a: .flows: expected a JSON array, got a number: 5\n");
  expect_unreadable(
      read(Command::kFlow, R"({"id":"tenant-a","override":{},"flows":[1,2]})"),
      "sluice-ctl: flow tenant-a: .flows[0]: expected a JSON object, got a number: 1\n");
  expect_unreadable(read(Command::kFlow, R"({"flows":5})"),
                    "sluice-ctl: flow tenant-a: .override: expected a JSON object, got nothing (no "
                    "such field)\n");
  expect_unreadable(read(Command::kFlows, "[1,2]"),
                    "sluice-ctl: flows: .[0]: expected a JSON object, got a number: 1\n");
  expect_unreadable(read(Command::kFlows, R"([{"id":"a"},"b"])"),
                    "sluice-ctl: flows: .[1]: expected a JSON object, got a string: \"b\"\n");
  expect_unreadable(read(Command::kBands, "[[]]"),
                    "sluice-ctl: bands: .[0]: expected a JSON object, got an array: []\n");
  expect_unreadable(read(Command::kEndpoints, "[null]"),
                    "sluice-ctl: endpoints: .[0]: expected a JSON object, got null\n");
}

TEST(CtlAnswers, FieldsOfAnotherType) {
  struct Case {
    Command command;
    const char* body;
    const char* err;
  };
  const Case cases[] = {
      {Command::kFlows, R"([{"id":5}])", "flows: .[0].id: expected a string, got a number: 5"},
      {Command::kFlows, R"([{"id":"a","weight":"heavy"}])",
       "flows: .[0].weight: expected a number, got a string: \"heavy\""},
      {Command::kFlows, R"([{"id":"a","outcomes":[1]}])",
       "flows: .[0].outcomes: expected a JSON object, got an array: [1]"},
      {Command::kFlows, R"([{"id":"a","outcomes":{"evicted-ttl":"3"}}])",
       "flows: .[0].outcomes.evicted-ttl: expected a number, got a string: \"3\""},
      {Command::kFlows, R"([{"id":"a","lastActiveMsAgo":"soon"}])",
       "flows: .[0].lastActiveMsAgo: expected a number, got a string: \"soon\""},
      {Command::kFlows, R"([{"id":"a","queued":{"n":1}}])",
       "flows: .[0].queued: expected a number, got an object: {\"n\":1}"},
      {Command::kFlow, R"({"override":[],"flows":[]})",
       "flow tenant-a: .override: expected a JSON object, got an array: []"},
      {Command::kFlow, R"({"override":{},"flows":[{"id":"a","weight":"x"}]})",
       "flow tenant-a: .flows[0].weight: expected a number, got a string: \"x\""},
      {Command::kFlowSet, R"({"override":"none"})",
       "flow set tenant-a: .override: expected a JSON object, got a string: \"none\""},
      {Command::kFlowSet, R"({"id":"tenant-a"})",
       "flow set tenant-a: .override: expected a JSON object, got nothing (no such field)"},
      {Command::kBands, R"([{"priority":0,"configured":"yes"}])",
       "bands: .[0].configured: expected a boolean, got a string: \"yes\""},
      {Command::kBands, R"([{"priority":0}])",
       "bands: .[0].configured: expected a boolean, got nothing (no such field)"},
      {Command::kBands, R"([{"priority":"high","configured":true}])",
       "bands: .[0].priority: expected a number, got a string: \"high\""},
      {Command::kBands, R"([{"configured":true,"fairnessPolicy":7}])",
       "bands: .[0].fairnessPolicy: expected a string, got a number: 7"},
      {Command::kEndpoints, R"([{"address":"a","labels":["zone"],"removed":false,"healthy":true}])",
       "endpoints: .[0].labels: expected a JSON object, got an array: [\"zone\"]"},
      {Command::kEndpoints,
       R"([{"address":"a","labels":{"zone":1},"removed":false,"healthy":true}])",
       "endpoints: .[0].labels.zone: expected a string, got a number: 1"},
      {Command::kEndpoints, R"([{"address":"a","metrics":"stale","removed":false,"healthy":true}])",
       "endpoints: .[0].metrics: expected a JSON object, got a string: \"stale\""},
      {Command::kEndpoints,
       R"([{"address":"a","metrics":{"ageMs":"old"},"removed":false,"healthy":true}])",
       "endpoints: .[0].metrics.ageMs: expected a number, got a string: \"old\""},
      {Command::kEndpoints, R"([{"address":"a","healthy":true}])",
       "endpoints: .[0].removed: expected a boolean, got nothing (no such field)"},
      {Command::kEndpoints, R"([{"address":"a","removed":false,"healthy":1}])",
       "endpoints: .[0].healthy: expected a boolean, got a number: 1"},
      {Command::kEndpoints, R"([{"address":8000,"removed":false,"healthy":true}])",
       "endpoints: .[0].address: expected a string, got a number: 8000"},
      {Command::kReload, R"({"applied":"all"})",
       "reload: .applied: expected a JSON array, got a string: \"all\""},
      {Command::kReload, R"({"applied":[],"restartRequired":{"server":1}})",
       "reload: .restartRequired: expected a JSON array, got an object: {\"server\":1}"},
      {Command::kDrainStatus, R"({"state":1,"queued":0,"inFlight":0})",
       "drain status: .state: expected a string, got a number: 1"},
      {Command::kDrainStatus, R"({"queued":0,"inFlight":0})",
       "drain status: .state: expected a string, got nothing (no such field)"},
      {Command::kDrain, R"({"state":"draining","queued":"3"})",
       "drain: .queued: expected a number, got a string: \"3\""},
      {Command::kDrainWait, R"({"state":"draining","inFlight":[2]})",
       "drain --wait: .inFlight: expected a number, got an array: [2]"},
      {Command::kDrainCancel, R"({"state":null})",
       "drain cancel: .state: expected a string, got null"},
  };
  for (const auto& c : cases) {
    for (bool as_json : {false, true}) {
      SCOPED_TRACE(std::string(c.body) + (as_json ? " --json" : ""));
      expect_unreadable(read(c.command, c.body, 200, as_json),
                        std::string("sluice-ctl: ") + c.err + "\n");
    }
  }
}

TEST(CtlAnswers, AbsentAndNullCellsShowADash) {
  // What the server leaves out is "-", not an error, as the bands and
  // endpoints tables showed it (the flows table's const operator[] on an
  // absent field was undefined behaviour: an assertion in a Debug build).
  const auto o = read(Command::kFlows, R"([{"id":"a","weight":null}])");
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.out.substr(o.out.find('\n') + 1),
            "a   -         -     -       -       -      -          -           -                 "
            "-       0.0s\n");
  EXPECT_EQ(read(Command::kReload, "{}").out, "reloaded; nothing changed\n");
  EXPECT_EQ(read(Command::kDrainStatus, R"({"state":"serving"})").out,
            "serving: - queued, - in flight\n");
}

// --- Bytes that are not JSON, and JSON sluice-ctl will not hold. ---

TEST(CtlAnswers, NotJson) {
  expect_unreadable(read(Command::kFlows, "hello"),
                    "sluice-ctl: flows: expected a JSON array, got an answer that is not JSON (5 "
                    "bytes): hello\n");
  expect_unreadable(read(Command::kDrainStatus, ""),
                    "sluice-ctl: drain status: expected a JSON object, got an empty answer\n");
  // Invalid UTF-8 and control bytes are shown escaped.
  expect_unreadable(read(Command::kReload, "\"\xff\xfe\"\x1b[31m"),
                    "sluice-ctl: reload: expected a JSON object, got an answer that is not JSON (9 "
                    "bytes): \"\\xff\\xfe\"\\x1b[31m\n");
  // Out of a double's range: nlohmann refuses it rather than making it inf.
  expect_unreadable(read(Command::kDrainStatus, R"({"state":"serving","queued":1e400})"),
                    "sluice-ctl: drain status: expected a JSON object, got an answer that is not "
                    "JSON (34 bytes): {\"state\":\"serving\",\"queued\":1e400}\n");
  // A long answer is quoted in part.
  const auto o = read(Command::kFlows, std::string(1 << 20, '!'));
  EXPECT_EQ(o.exit_code, kExitUnreadable);
  EXPECT_NE(o.err.find("... (1048576 bytes)"), std::string::npos) << o.err;
  expect_safe_lines(o.err);
  EXPECT_LT(o.err.size(), 400u);
}

TEST(CtlAnswers, DeepNestingIsRefusedWithoutRecursion) {
  const std::size_t depth = 200000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  for (Command c : {Command::kFlows, Command::kDrainStatus}) {
    const auto o = read(c, deep, 200, true);
    EXPECT_EQ(o.exit_code, kExitUnreadable);
    EXPECT_NE(o.err.find("got JSON nested deeper than 64 levels (400000 bytes): [[[["),
              std::string::npos)
        << o.err;
    expect_safe_lines(o.err);
  }
  // A refusal's body too.
  EXPECT_EQ(read(Command::kReload, deep, 500).exit_code, kExitRefused);
  // 64 levels are still an answer (of another shape here).
  const std::string nested = "[" + std::string(63, '[') + std::string(63, ']') + "]";
  EXPECT_NE(read(Command::kFlows, nested).err.find(".[0]: expected a JSON object, got an array"),
            std::string::npos);
}

TEST(CtlAnswers, HugeNumbersPrintWhole) {
  const auto o = read(
      Command::kFlows,
      R"([{"id":"a","queued":18446744073709551615,"inFlight":-9223372036854775808,)"
      R"("weight":1e308,"tokensCharged":123456789012345678901234567890,"lastActiveMsAgo":1e40}])");
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_NE(o.out.find(" 18446744073709551615 "), std::string::npos) << o.out;  // not -1
  EXPECT_NE(o.out.find(" -9223372036854775808 "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" 1e+308 "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" 1.23457e+29 "), std::string::npos) << o.out;
  // LAST-ACTIVE whole (1e37 s: 38 digits), not cut at 31 characters.
  EXPECT_NE(o.out.find(" 10000000000000000719354278919532445696.0s\n"), std::string::npos) << o.out;
  const auto e =
      read(Command::kEndpoints,
           R"([{"address":"a","removed":false,"healthy":true,"metrics":{"ageMs":-1e308}}])");
  EXPECT_EQ(e.exit_code, kExitDone) << e.err;
  EXPECT_NE(e.out.find(" -1000000000"), std::string::npos) << e.out;
}

TEST(CtlAnswers, CellsAreEscapedForTheTerminal) {
  const auto o =
      read(Command::kEndpoints,
           R"([{"address":"a\u001b[2J","engine":"v\u0000llm","labels":{"z\nne":"caf\u00e9\u009b"},)"
           R"("removed":false,"healthy":true}])");
  EXPECT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_NE(o.out.find("a\\x1b[2J "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("v\\x00llm "), std::string::npos) << o.out;
  // UTF-8 text stays; a C1 control (U+009B, a CSI to some terminals) does not.
  EXPECT_NE(o.out.find("z\\nne=caf\xc3\xa9\\xc2\\x9b\n"), std::string::npos) << o.out;
  for (unsigned char c : o.out) EXPECT_TRUE(c >= 0x20 || c == '\n');
  // Messages are ASCII whatever the answer holds.
  const auto m = read(Command::kDrainStatus,
                      "{\"state\":\"caf\xc3\xa9\\u001b\\u009b\","
                      "\"queued\":\"\xe2\x80\xae\"}");
  expect_unreadable(m,
                    "sluice-ctl: drain status: .queued: expected a number, got a string: "
                    "\"\\u202e\"\n");
  // JSON on a line: dump escapes C0 controls, not DEL or C1 ones.
  EXPECT_EQ(read(Command::kBandSet, "{\"p\":\"\\u007f\\u0085\\u0001\"}").out,
            "band 10: {\"p\":\"\\x7f\\xc2\\x85\\u0001\"}\n");
  EXPECT_EQ(read(Command::kDrainStatus, "{\"state\":\"dr\\u0007ained\"}").out,
            "dr\\x07ained: - queued, - in flight\n");
}

// Issue 41, item 6: GET /admin/v1/quotas as a table. Periods and resets
// as Go prints durations, a cost in the config's units (the answer has
// micro-units), a shadow limit's would-be refusals; --json is the answer.
TEST(CtlAnswers, QuotasTable) {
  const std::string body = R"([
    {"tenant":"acme","name":"tpm","measure":"tokens","limit":20000,"used":1234,"reserved":100,
     "remaining":18666,"resetsInMs":360000,"mode":"enforce","refused":2,"wouldRefuse":0,
     "windowMs":60000},
    {"key":"key_ops","name":"spend","measure":"cost","limit":5000000,"used":250000,
     "reserved":0,"remaining":4750000,"resetsInMs":1500,"mode":"shadow","refused":0,
     "wouldRefuse":3,"calendar":"month"},
    {"tenant":"beta","name":"rps","measure":"requests","limit":10,"used":0,"reserved":0,
     "remaining":10,"resetsInMs":250,"mode":"enforce","refused":0,"wouldRefuse":0,
     "windowMs":5400000}])";
  const auto o = read(Command::kQuotas, body);
  ASSERT_EQ(o.exit_code, kExitDone) << o.err;
  EXPECT_EQ(o.out,
            "OWNER        NAME   MEASURE   PERIOD   LIMIT  USED  RESERVED  REMAINING  RESETS-IN  "
            "MODE     REFUSED\n"
            "tenant:acme  tpm    tokens    1m0s     20000  1234  100       18666      6m0s       "
            "enforce  2\n"
            "key:key_ops  spend  cost      month    5      0.25  0         4.75       1.5s       "
            "shadow   would 3\n"
            "tenant:beta  rps    requests  1h30m0s  10     0     0         10         250ms      "
            "enforce  0\n");
  EXPECT_EQ(read(Command::kQuotas, body, 200, true).out,
            nlohmann::json::parse(body).dump(2) + "\n");
  expect_unreadable(read(Command::kQuotas, R"([{"tenant":"a","used":"lots"}])"),
                    "sluice-ctl: quotas: .[0].used: expected a number, got a string: \"lots\"\n");
  const auto reset =
      read_answer({Command::kQuotaReset, "acme", false}, 200, R"({"tenant":"acme","reset":true})");
  EXPECT_EQ(reset.out,
            "quota acme: reset; its windows count from now (what is in flight stays held)\n");
  EXPECT_EQ(read_answer({Command::kQuotaReset, "nobody", false}, 404,
                        R"({"error":{"code":"no-quota","message":"tenant 'nobody' has no quota"}})")
                .err,
            "sluice-ctl: 404 no-quota: tenant 'nobody' has no quota\n");
}

}  // namespace
}  // namespace sluice::ctl
