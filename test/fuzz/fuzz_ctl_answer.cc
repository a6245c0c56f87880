// sluice-ctl's reading of the admin plane's answers (tools/ctl/
// ctl_answers.h): what a server at the admin address sends back. Byte 0
// picks the command (and --json), byte 1 the HTTP status, the rest is the
// body. Oracles: nothing throws; the exit code is 0, 1 (refused) or 4
// (unreadable), and 1 exactly when the status is not the command's; a
// failure prints nothing on stdout and whole lines on stderr, each starting
// "sluice-ctl: ", bounded and without control bytes; a success prints on
// stdout only (key create also its one such line on stderr): with --json,
// JSON a strict parser accepts, otherwise text whose only control byte is
// the newline, and key create's text is the key alone, printable ASCII
// without spaces, on one line; drain --wait's reading agrees with the
// command's.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "finding.h"
#include "tools/ctl/ctl_answers.h"

namespace {

using sluice::ctl::Command;
using sluice::ctl::Outcome;

[[noreturn]] void violation(const char* what, const Outcome& o) {
  std::fprintf(stderr, "FINDING: %s (exit %d)\nstdout: %.300s\nstderr: %.300s\n", what, o.exit_code,
               o.out.c_str(), o.err.c_str());
  std::abort();
}

// Mostly 200, which is where the answer is read (201 for key create, last
// so that the seeds' earlier statuses kept their bytes).
constexpr int kStatuses[] = {200, 200, 200, 200, 202, 400, 401, 500, 201};

// Whole lines, each from sluice-ctl, bounded, without control bytes.
void check_lines(const std::string& err, const Outcome& o) {
  if (err.empty() || err.back() != '\n') violation("a message without a whole line", o);
  std::size_t start = 0;
  while (start < err.size()) {
    const std::size_t end = err.find('\n', start);
    const std::string_view line(err.data() + start, end - start);
    if (line.substr(0, 12) != "sluice-ctl: ") violation("a line not from sluice-ctl", o);
    if (line.size() > 2048) violation("a message longer than 2048 bytes", o);
    for (unsigned char c : line)
      if (c < 0x20 || c == 0x7f) violation("a control byte in a message", o);
    start = end + 1;
  }
}

void check(const sluice::ctl::Request& request, int status, const Outcome& o) {
  const bool metrics = request.command == Command::kMetrics;
  const bool create = request.command == Command::kKeyCreate;
  const bool accepted = status == 200 || (status == 202 && request.command == Command::kDrain) ||
                        (status == 201 && create);
  if (o.exit_code != 0 && o.exit_code != 1 && o.exit_code != 4)
    violation("an exit code other than 0, 1 or 4", o);
  if ((o.exit_code == 1) != !accepted) violation("exit 1 and a refused status disagree", o);
  if (o.exit_code != 0) {
    if (!o.out.empty()) violation("a failure printed on stdout", o);
    check_lines(o.err, o);
    return;
  }
  if (create) {
    // The key is shown once: a line on stderr says so.
    check_lines(o.err, o);
    if (o.err.find('\n') + 1 != o.err.size()) violation("key create said more than one line", o);
  } else if (!o.err.empty()) {
    violation("a success wrote on stderr", o);
  }
  if (metrics) return;  // Prometheus text, passed on as it came
  if (o.out.empty() || o.out.back() != '\n') violation("a success without a whole line", o);
  if (request.as_json) {
    if (!nlohmann::json::accept(o.out)) violation("--json printed what is not JSON", o);
    return;
  }
  for (unsigned char c : o.out)
    if ((c < 0x20 && c != '\n') || c == 0x7f) violation("a control byte in a table or line", o);
  if (create) {
    // KEY=$(sluice-ctl key create ...) captures exactly the key.
    if (o.out.size() < 2) violation("key create printed no key", o);
    for (std::size_t i = 0; i + 1 < o.out.size(); ++i)
      if (o.out[i] <= 0x20 || o.out[i] >= 0x7f)
        violation("key create printed more than a key of printable ASCII", o);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  sluice::ctl::Request request;
  request.command = static_cast<Command>(data[0] % sluice::ctl::kCommandCount);
  request.as_json = (data[0] / sluice::ctl::kCommandCount) % 2 == 1;
  if (request.command == Command::kFlow || request.command == Command::kFlowSet ||
      request.command == Command::kFlowReset)
    request.subject = "tenant-a";
  if (request.command == Command::kBandSet || request.command == Command::kBandDelete)
    request.subject = "10";
  if (request.command == Command::kKey || request.command == Command::kKeyDisable ||
      request.command == Command::kKeyEnable || request.command == Command::kKeyRevoke)
    request.subject = "key_ops";
  const int status = kStatuses[data[1] % std::size(kStatuses)];
  const std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  try {
    const Outcome o = sluice::ctl::read_answer(request, status, body);
    check(request, status, o);
    if (request.command == Command::kDrain || request.command == Command::kDrainWait ||
        request.command == Command::kDrainStatus || request.command == Command::kDrainCancel) {
      const auto d = sluice::ctl::read_drain(request, status, body);
      if (d.outcome.exit_code != o.exit_code || d.outcome.out != o.out || d.outcome.err != o.err)
        violation("read_drain and read_answer disagree", d.outcome);
      if (o.exit_code != 0 && (!d.state.empty() || !d.counts.empty()))
        violation("a drain state from an answer that was not read", d.outcome);
    }
  } catch (const std::exception& e) {
    sluice::fuzz::undocumented_exception("sluice-ctl's reading of an admin answer", e);
  } catch (...) {
    sluice::fuzz::unknown_exception("sluice-ctl's reading of an admin answer");
  }
  return 0;
}
