// The seam for the engines' KV-cache events: what a KV-event source hands
// the data layer, and where it goes. vLLM and SGLang publish, per engine,
// which blocks of tokens entered and left their KV cache (over ZMQ, each
// batch msgpack-encoded); llm-d's precise-prefix-cache plugins score an
// endpoint by how much of a request's prompt it holds, exactly, instead of
// guessing from where earlier requests went (approx-prefix-cache-producer).
//
// What is built: the events, the source interface and the index they feed
// (datalayer/kv_block_index.h), bounded and tested. What a precise
// prefix-cache plugin needs beside it: a source (ZMQ + msgpack, Debian's
// libzmq3-dev and libmsgpack-cxx-dev) and the request's token ids (a
// tokenizer: the index is keyed by tokens, not characters). Neither is
// built; configs naming those plugins are refused (config/llmd_plugins.h).
//
// Threads: a source runs on a thread of its own (as the scraper does) and
// hands each decoded batch to its sink there; the sink posts it to the
// dispatcher, the index's one writer, which applies it between decisions.
// A source never blocks the dispatcher and never grows without a bound: a
// batch over maxEventsPerBatch is dropped whole and counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace sluice::datalayer {

// One event of an engine's KV cache. Engine block hashes are the engine's
// own (opaque, per engine); the index keys blocks by their tokens instead,
// so that a request's prompt can be looked up without the engine's hash.
struct KvEvent {
  enum class Kind : std::uint8_t {
    kStored,      // blocks entered the cache, in prompt order
    kRemoved,     // blocks left it
    kAllCleared,  // the engine dropped its whole cache (a restart, a reset)
  };
  Kind kind = Kind::kStored;
  std::vector<std::uint64_t> block_hashes;  // the engine's, one per block
  // kStored: the engine hash of the block before the first (0: these start
  // a prompt), and the blocks' tokens, block_size per block in order.
  std::uint64_t parent_hash = 0;
  std::vector<std::uint32_t> token_ids;
  std::uint32_t block_size = 0;
};

// What one endpoint's engine published in one message.
struct KvEventBatch {
  std::size_t endpoint = 0;  // the endpoint slot the source is bound to
  std::vector<KvEvent> events;
};

// A source of KV events for the endpoints it is given (one connection per
// endpoint). start() and stop() from the thread that owns it; the sink is
// called on the source's own thread.
class KvEventSource {
 public:
  using Sink = std::function<void(KvEventBatch&&)>;
  virtual ~KvEventSource() = default;
  virtual void start(Sink sink) = 0;
  virtual void stop() = 0;
  // Batches dropped (undecodable, over the bound); any thread.
  virtual std::uint64_t dropped() const = 0;
};

}  // namespace sluice::datalayer
