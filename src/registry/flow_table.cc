#include "registry/flow_table.h"

#include <xxhash.h>

#include <algorithm>
#include <random>
#include <utility>

#include "registry/flow_registry.h"

namespace sluice::registry {

FlowTable::~FlowTable() {
  for (auto& s : slots_) delete s.flow;
}

std::uint64_t FlowTable::hash(std::string_view id) {
  // Ids are chosen by clients: with a known seed one could make thousands
  // of ids that probe the same run (each lookup then costs the whole run,
  // on the dispatcher). The seed is secret, drawn once per process.
  static const std::uint64_t seed = [] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }();
  return XXH3_64bits_withSeed(id.data(), id.size(), seed);
}

Flow* FlowTable::find(std::string_view id, std::uint64_t h) const {
  if (size_ == 0) return nullptr;
  for (std::size_t i = h & mask();; i = (i + 1) & mask()) {
    const Slot& s = slots_[i];
    if (!s.flow) return nullptr;
    if (s.hash == h && s.flow->key().id == id) return s.flow;
  }
}

const Flow* FlowTable::guess(std::uint64_t h) const {
  if (size_ == 0) return nullptr;
  constexpr std::size_t kPerLine = 64 / sizeof(Slot);
  const std::size_t i = h & mask();
  const std::size_t line_end = std::min((i | (kPerLine - 1)) + 1, slots_.size());
  for (std::size_t j = i; j < line_end; ++j) {
    const Slot& s = slots_[j];
    if (!s.flow) return nullptr;
    if (s.hash == h) return s.flow;
  }
  return nullptr;
}

Flow& FlowTable::insert(std::unique_ptr<Flow> flow, std::uint64_t h) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  std::size_t i = h & mask();
  while (slots_[i].flow) i = (i + 1) & mask();
  slots_[i] = Slot{h, flow.release()};
  ++size_;
  return *slots_[i].flow;
}

bool FlowTable::erase(std::string_view id, std::uint64_t h) {
  if (size_ == 0) return false;
  std::size_t i = h & mask();
  for (;; i = (i + 1) & mask()) {
    if (!slots_[i].flow) return false;
    if (slots_[i].hash == h && slots_[i].flow->key().id == id) break;
  }
  delete slots_[i].flow;
  slots_[i] = Slot{};
  --size_;
  // Backward shift: move each following entry of the run into the hole if
  // its home slot does not lie (cyclically) between the hole and it.
  for (std::size_t j = (i + 1) & mask(); slots_[j].flow; j = (j + 1) & mask()) {
    const std::size_t home = slots_[j].hash & mask();
    const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    slots_[i] = slots_[j];
    slots_[j] = Slot{};
    i = j;
  }
  return true;
}

void FlowTable::grow() {
  // The new array first: if it cannot be had, the table is unchanged.
  HugeVector<Slot> grown(slots_.empty() ? 16 : slots_.size() * 2, Slot{});
  grown.swap(slots_);
  for (const Slot& s : grown) {
    if (!s.flow) continue;
    std::size_t i = s.hash & mask();
    while (slots_[i].flow) i = (i + 1) & mask();
    slots_[i] = s;
  }
}

}  // namespace sluice::registry
