#include "llm/tokenizer/tokenizer.h"

namespace hf2pte::llm {

std::string TextStreamer::pending_text(bool final) {
  std::vector<int64_t> ids;
  if (anchor_) ids.push_back(*anchor_);
  ids.insert(ids.end(), ids_.begin(), ids_.end());
  std::string full = tok_.decode(ids);
  if (anchor_) {
    std::string prefix = tok_.decode(std::span<const int64_t>(&*anchor_, 1));
    full = full.compare(0, prefix.size(), prefix) == 0 ? full.substr(prefix.size()) : full;
  }
  if (!final) {
    // Hold back trailing U+FFFD: they are bytes whose character is not complete yet.
    static const std::string kRepl = "\xEF\xBF\xBD";
    while (full.size() >= kRepl.size() && full.compare(full.size() - kRepl.size(), kRepl.size(), kRepl) == 0) {
      full.resize(full.size() - kRepl.size());
    }
  }
  if (full.size() <= printed_) return {};
  std::string out = full.substr(printed_);
  printed_ = full.size();
  return out;
}

std::string TextStreamer::push(int64_t id) {
  ids_.push_back(id);
  return pending_text(false);
}

std::string TextStreamer::flush() { return pending_text(true); }

}  // namespace hf2pte::llm
