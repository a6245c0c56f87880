#include "observe/access_log.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>

namespace sluice::observe {

namespace {
std::atomic<std::uint64_t> g_log_ids{0};
constexpr auto kFlushInterval = std::chrono::milliseconds(100);
}  // namespace

AccessLog::~AccessLog() {
  if (writer_.joinable()) {
    {
      std::lock_guard lock(wake_mu_);
      stop_ = true;
    }
    wake_.notify_one();
    writer_.join();
  }
  flush();
  if (owned_ && fd_ >= 0) ::close(fd_);
}

bool AccessLog::open(const std::string& target, const std::string& format, std::string& error) {
  json_ = format != "text";
  if (target.empty()) return true;
  if (target == "-") {
    fd_ = STDERR_FILENO;
  } else {
    fd_ = ::open(target.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      error = "cannot open access log " + target + ": " + std::strerror(errno);
      return false;
    }
    owned_ = true;
  }
  id_ = ++g_log_ids;
  writer_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sluice-acclog");
    run();
  });
  return true;
}

AccessLog::ThreadBuffer& AccessLog::buffer_for_this_thread() {
  // One cached buffer per thread; the registry is searched only on a
  // thread's first line (or when it writes to another log).
  thread_local std::uint64_t cached_id = 0;
  thread_local ThreadBuffer* cached = nullptr;
  if (cached_id == id_ && cached) return *cached;
  std::lock_guard lock(registry_mu_);
  const auto self = std::this_thread::get_id();
  ThreadBuffer* found = nullptr;
  for (auto& [tid, b] : buffers_)
    if (tid == self) found = b.get();
  if (!found) {
    buffers_.emplace_back(self, std::make_unique<ThreadBuffer>());
    found = buffers_.back().second.get();
  }
  cached_id = id_;
  cached = found;
  return *found;
}

void AccessLog::run() {
  std::unique_lock lock(wake_mu_);
  while (!stop_) {
    wake_.wait_for(lock, kFlushInterval);
    lock.unlock();
    {
      std::lock_guard w(write_mu_);
      flush_locked();
    }
    lock.lock();
  }
}

void AccessLog::flush() {
  if (fd_ < 0) return;
  std::lock_guard w(write_mu_);
  flush_locked();
}

void AccessLog::flush_locked() {
  std::vector<ThreadBuffer*> all;
  {
    std::lock_guard lock(registry_mu_);
    for (auto& [tid, b] : buffers_) all.push_back(b.get());
  }
  for (ThreadBuffer* b : all) {
    {
      // Swap, not copy: the I/O thread holds the lock for an append only.
      std::lock_guard lock(b->mu);
      if (b->data.empty()) continue;
      out_.swap(b->data);
      b->signalled = false;
    }
    write_out(out_);
    out_.clear();
  }
}

void AccessLog::write_out(const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // Disk full, a closed pipe: the rest is lost, and counted.
    const auto lost =
        std::count(data.begin() + static_cast<std::ptrdiff_t>(done), data.end(), '\n');
    dropped_.fetch_add(static_cast<std::uint64_t>(lost), std::memory_order_relaxed);
    return;
  }
}

namespace {

void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(r.ptr - buf));
}

void append_ms(std::string& out, double ms) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, ms, std::chars_format::fixed, 3);
  out.append(buf, static_cast<std::size_t>(r.ptr - buf));
}

// Text values: printable ASCII without spaces, quotes or '=' as is; anything
// else quoted and escaped as JSON (control bytes and non-UTF-8 included), so a
// client cannot forge a line or a field.
void append_text_value(std::string& out, std::string_view s) {
  if (s.empty()) {
    out += '-';
    return;
  }
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u < 0x7f && c != '"' && c != '\\' && c != '=';
  });
  if (plain) {
    out += s;
    return;
  }
  append_json_string(out, s);
}

}  // namespace

namespace {

// UTC time, millisecond precision.
void utc_timestamp(char (&ts)[96]) {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
}

// A line's fields, in their order on the line.
struct LineFields {
  struct Str {
    const char* key;
    std::string_view value;
    bool omit_empty = false;  // a field most lines do not have
  };
  struct Num {
    const char* key;
    std::int64_t value;
  };
  struct Ms {
    const char* key;
    double value;
  };
  Str strings[12];
  Num ints[4];
  Ms times[3];
};

LineFields fields_of(const AccessRecord& r) {
  return LineFields{
      {{"request_id", r.request_id},
       {"method", r.method},
       {"path", r.path},
       {"flow", r.flow},
       {"tenant", r.tenant},
       {"key_id", r.key_id},
       {"objective", r.objective},
       {"model", r.model},
       {"outcome", r.outcome},
       {"endpoint", r.endpoint},
       {"client_cert", r.client_cert, true},
       {"quota", r.quota, true}},
      {{"priority", r.priority},
       {"status", r.status},
       {"input_tokens", static_cast<std::int64_t>(r.input_tokens)},
       {"output_tokens", static_cast<std::int64_t>(r.output_tokens)}},
      {{"queue_ms", r.queue_ms}, {"upstream_ms", r.upstream_ms}, {"total_ms", r.total_ms}}};
}

void format_json(const char* ts, const LineFields& f, std::string& out) {
  out += "{\"ts\":\"";
  out += ts;
  out += '"';
  for (const auto& s : f.strings) {
    if (s.omit_empty && s.value.empty()) continue;
    out += ",\"";
    out += s.key;
    out += "\":";
    append_json_string(out, s.value);
  }
  for (const auto& n : f.ints) {
    out += ",\"";
    out += n.key;
    out += "\":";
    append_int(out, n.value);
  }
  for (const auto& m : f.times) {
    out += ",\"";
    out += m.key;
    out += "\":";
    append_ms(out, m.value);
  }
  out += "}\n";
}

void format_text(const char* ts, const LineFields& f, std::string& out) {
  out += ts;
  for (const auto& s : f.strings) {
    if (s.omit_empty && s.value.empty()) continue;
    out += ' ';
    out += s.key;
    out += '=';
    append_text_value(out, s.value);
  }
  for (const auto& n : f.ints) {
    out += ' ';
    out += n.key;
    out += '=';
    append_int(out, n.value);
  }
  for (const auto& m : f.times) {
    out += ' ';
    out += m.key;
    out += '=';
    append_ms(out, m.value);
  }
  out += '\n';
}

}  // namespace

void AccessLog::write(const AccessRecord& r, std::string& out) {
  if (fd_ < 0) return;
  out.clear();
  char ts[96];
  utc_timestamp(ts);
  const LineFields f = fields_of(r);
  if (json_)
    format_json(ts, f, out);
  else
    format_text(ts, f, out);
  append_line(out);
}

// To this thread's buffer (bounded: a line past it is dropped and counted),
// and the writer woken once the buffer is a quarter full.
void AccessLog::append_line(const std::string& line) {
  ThreadBuffer& b = buffer_for_this_thread();
  bool wake = false;
  {
    std::lock_guard lock(b.mu);
    if (b.data.size() + line.size() > kBufferBytes) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (b.data.capacity() == 0) b.data.reserve(64u << 10);
    b.data += line;
    if (!b.signalled && b.data.size() > kBufferBytes / 4) wake = b.signalled = true;
  }
  if (wake) wake_.notify_one();
}

}  // namespace sluice::observe
