// The log's own writer: a stalled stderr never blocks the thread that logs;
// past the bound lines are dropped and counted, and a note says so once
// stderr drains.
#include "observe/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>

namespace sluice::log {
namespace {

TEST(Log, StalledStderrDropsPastTheBoundWithoutBlocking) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  const int saved = ::dup(STDERR_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_GE(::dup2(p[1], STDERR_FILENO), 0);  // nobody reads it for now
  start_writer();
  const std::string message(200, 'x');
  const auto start = std::chrono::steady_clock::now();
  constexpr int kLines = 20000;  // ~4.5 MB: the pipe (64 KiB) and the bound (1 MiB) overflow
  for (int i = 0; i < kLines; ++i) write(Level::kWarn, "test", message);
  const auto took = std::chrono::steady_clock::now() - start;
  // Not a timing claim: with a blocking write this loop never ends at all
  // (the pipe is full and nobody reads); the bound is generous for ASan.
  EXPECT_LT(took, std::chrono::seconds(30));
  EXPECT_GT(dropped(), 0u);
  EXPECT_LT(dropped(), static_cast<std::uint64_t>(kLines));
  // Drain while the writer stops: what was kept arrives, with the note.
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  });
  // A line that finds room once the writer drains (each attempt that finds
  // the buffer still full is one more drop).
  std::uint64_t attempts = 0, before = 0;
  do {
    before = dropped();
    write(Level::kWarn, "test", "after");
    ++attempts;
  } while (dropped() != before);
  stop_writer();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(p[1]);
  reader.join();
  ::close(p[0]);
  // Every line written either arrived or was counted, and every drop is in
  // a note. Usually there is one note, but a writer thread that was not
  // scheduled until the bound had filled once frees room, a line brings
  // the note so far, and the second fill drops again: a note per episode.
  const std::string kNote = " line(s) dropped: stderr was not read fast enough";
  std::uint64_t lines = 0, notes = 0, noted = 0;
  std::size_t at = 0;
  for (std::size_t nl; (nl = got.find('\n', at)) != std::string::npos; at = nl + 1) {
    const std::string_view line(got.data() + at, nl - at);
    if (line.size() > kNote.size() && line.substr(line.size() - kNote.size()) == kNote) {
      const std::size_t start = line.rfind(' ', line.size() - kNote.size() - 1) + 1;
      noted += std::stoull(std::string(line.substr(start, line.size() - kNote.size() - start)));
      ++notes;
    } else {
      ++lines;
    }
  }
  EXPECT_EQ(lines + dropped(), static_cast<std::uint64_t>(kLines) + attempts);
  EXPECT_GE(notes, 1u);
  EXPECT_EQ(noted, dropped());
  EXPECT_NE(got.find("test: after"), std::string::npos);
}

}  // namespace
}  // namespace sluice::log
