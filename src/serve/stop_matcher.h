// Stop strings matched across token boundaries (OpenAI's `stop`): text is fed
// as the tokens decode, and only text that can no longer be the start of a
// stop string is released, so a stop string is never streamed, even in part.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hf2pte::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  /// Adds `text`; returns the part that is now safe to emit. After a match it
  /// returns the text before the stop string and matched() is true; further
  /// calls return nothing.
  std::string feed(std::string_view text);
  /// The text held back (a possible stop-string start) once generation ends without a match.
  std::string flush();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace hf2pte::serve
