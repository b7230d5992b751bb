#include "llm/tokenizer/sp_tokenizer.h"

#include <sentencepiece_processor.h>

namespace hf2pte::llm::tok {
namespace {

class SpTokenizer : public Tokenizer {
 public:
  Status init(std::string_view bytes, bool add_bos) {
    auto st = sp_.LoadFromSerializedProto(std::string(bytes));
    // A failed load leaves the processor unusable (unk_id() would crash): stop here.
    if (!st.ok()) return make_error(ErrorCode::kInvalidInput, "cannot load SentencePiece model: {} (tokenizer.model)", st.ToString());
    add_bos_sp_ = add_bos;
    if (sp_.bos_id() >= 0) bos_id_ = sp_.bos_id();
    if (sp_.eos_id() >= 0) eos_ids_ = {sp_.eos_id()};
    return Status::ok();
  }
  void set_config(std::optional<int64_t> bos, std::vector<int64_t> eos) {
    if (bos) bos_id_ = bos;
    if (!eos.empty()) eos_ids_ = std::move(eos);
  }
  Result<std::vector<int64_t>> encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<int> ids;
    auto st = sp_.Encode(text, &ids);
    if (!st.ok()) return make_error(ErrorCode::kInvalidInput, "SentencePiece encode failed: {}", st.ToString());
    std::vector<int64_t> out;
    if (add_special_tokens && add_bos_sp_ && bos_id_) out.push_back(*bos_id_);
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }
  std::string decode(std::span<const int64_t> ids, bool skip_special_tokens) const override {
    std::vector<int> v;
    for (auto id : ids) {
      if (id < 0 || id >= sp_.GetPieceSize()) continue;
      if (skip_special_tokens && sp_.IsControl(int(id))) continue;
      v.push_back(int(id));
    }
    std::string out;
    (void)sp_.Decode(v, &out);
    return out;
  }
  int64_t vocab_size() const override { return sp_.GetPieceSize(); }
  std::optional<int64_t> token_to_id(std::string_view token) const override {
    int id = sp_.PieceToId(token);
    if (id == sp_.unk_id() && sp_.IdToPiece(id) != token) return std::nullopt;
    return id;
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
  bool add_bos_sp_ = true;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_sentencepiece_tokenizer(std::string_view model_bytes, bool add_bos) {
  auto t = std::make_unique<SpTokenizer>();
  HF2PTE_RETURN_IF_ERROR(t->init(model_bytes, add_bos));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace hf2pte::llm::tok
