#include "runtime/backend.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace hf2pte::rt {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Backend>, std::less<>> backends;
};

// Function-local static: backends register from static initialisers in other
// translation units, whose order relative to this one is unspecified.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

Status register_backend(std::string id, std::shared_ptr<const Backend> backend) {
  HF2PTE_CHECK_OR_RETURN(backend != nullptr, kInvalidArgument, "backend {} is null", id);
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  HF2PTE_CHECK_OR_RETURN(!r.backends.contains(id), kInvalidArgument, "backend {} is already registered", id);
  r.backends.emplace(std::move(id), std::move(backend));
  return Status::ok();
}

std::shared_ptr<const Backend> find_backend(std::string_view id) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.backends.find(id);
  return it == r.backends.end() ? nullptr : it->second;
}

std::vector<std::string> registered_backends() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> ids;
  for (const auto& [id, b] : r.backends) ids.push_back(id);
  return ids;
}

}  // namespace hf2pte::rt
