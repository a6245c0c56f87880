// The API key file (auth.apiKeys.file), re-read at runtime whenever it
// changes, and the Authorization header checked against the keys it holds.
// parse_key_file must never throw nor crash, and a file it accepts must
// render back to the same records (what the admin API writes is what it
// reads); any key presented is checked without a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "auth/api_keys.h"
#include "auth/authenticator.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<sluice::auth::KeyRecord> records;
  std::string error;
  if (!sluice::auth::parse_key_file(text, records, error)) {
    if (!records.empty()) std::abort();  // a refused file yields nothing
    if (error.empty()) std::abort();
    return 0;
  }
  std::vector<sluice::auth::KeyRecord> again;
  if (!sluice::auth::parse_key_file(sluice::auth::render_key_file(records), again, error) ||
      again != records)
    std::abort();
  const sluice::auth::KeyStore store(std::move(records));
  const sluice::auth::KeyRecord* found = nullptr;
  (void)store.check(sluice::auth::bearer_token(text), 0, &found);
  (void)store.check(text, 0, &found);
  return 0;
}
