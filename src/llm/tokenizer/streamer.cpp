// Incremental detokenization with a sliding window: the text of ids_[read_,
// end) is decode(ids_[prefix_, end)) minus decode(ids_[prefix_, read_)).
#include "llm/tokenizer/tokenizer.h"

namespace hf2pte::llm {
namespace {

bool ends_incomplete(const std::string& s) {
  static const std::string kRepl = "\xEF\xBF\xBD";  // U+FFFD: bytes whose character may still complete
  return s.size() >= kRepl.size() && s.compare(s.size() - kRepl.size(), kRepl.size(), kRepl) == 0;
}

}  // namespace

TextStreamer::TextStreamer(const Tokenizer& tok, std::optional<int64_t> anchor) : tok_(tok) {
  if (anchor) {
    ids_.push_back(*anchor);
    read_ = 1;
    prefix_text_ = decode_range(0, 1);
  }
}

std::string TextStreamer::decode_range(size_t begin, size_t end) const {
  return tok_.decode(std::span<const int64_t>(ids_.data() + begin, end - begin));
}

std::string TextStreamer::step(bool final) {
  if (read_ == ids_.size()) return {};
  std::string text = decode_range(prefix_, ids_.size());
  if (!final && ends_incomplete(text)) return {};  // wait for the rest of the character
  // Normally the window's text extends the context's text; where a decoder joins across tokens
  // (WordPiece cleanup, say) it may not, and the text after the common prefix is the best we can do.
  size_t common = 0;
  while (common < text.size() && common < prefix_text_.size() && text[common] == prefix_text_[common]) ++common;
  if (common < prefix_text_.size()) {
    while (common > 0 && (static_cast<unsigned char>(text[common]) & 0xC0) == 0x80) --common;  // whole characters
  }
  std::string out = text.substr(common);
  prefix_ = read_;
  read_ = ids_.size();
  prefix_text_ = decode_range(prefix_, read_);
  return out;
}

std::string TextStreamer::push(int64_t id) {
  ids_.push_back(id);
  return step(false);
}

std::string TextStreamer::flush() { return step(true); }

}  // namespace hf2pte::llm
