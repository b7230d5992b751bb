// hf2pte tokenize: text -> ids (one output line per input) and ids -> text,
// with a tokenizer from a checkpoint folder or embedded in a .pte.
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "llm/tokenizer/tokenizer.h"

namespace hf2pte::cli {

int fail(const Status& st) {
  std::fprintf(stderr, "hf2pte: error: %s\n", st.message().c_str());
  return is_input_error(st.code()) ? 2 : 1;
}

Result<std::vector<int64_t>> parse_id_list(const std::string& s, const char* flag) {
  std::vector<int64_t> ids;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? s.size() : comma + 1;
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) return make_error(ErrorCode::kInvalidArgument, "{} has an empty item; got '{}'", flag, s);
    item = item.substr(b, e - b + 1);
    try {
      size_t used = 0;
      ids.push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (...) {
      return make_error(ErrorCode::kInvalidArgument, "{} expects comma-separated integers; got '{}'", flag, s);
    }
  }
  return ids;
}

CLI::App* add_tokenize_command(CLI::App& app, TokenizeArgs& a) {
  auto* cmd = app.add_subcommand("tokenize", "encode text to token ids, or decode ids to text");
  cmd->add_option("--tokenizer", a.tokenizer, "checkpoint folder (tokenizer.json / tokenizer.model) or .pte with an embedded tokenizer")
      ->required();
  a.text_opt = cmd->add_option("--text", a.text, "text to encode");
  auto* file = cmd->add_option("--text-file", a.text_file, "file with one JSON-encoded string per line");
  auto* dec = cmd->add_option("--decode", a.decode, "comma-separated ids to decode");
  a.text_opt->excludes(file)->excludes(dec);
  file->excludes(dec);
  cmd->add_flag("--no-special", a.no_special, "do not add the template's special tokens (BOS/EOS)");
  return cmd;
}

int run_tokenize(const TokenizeArgs& a) {
  if (a.text_opt->count() == 0 && a.text_file.empty() && a.decode.empty()) {
    return fail(make_error(ErrorCode::kInvalidArgument, "tokenize needs --text, --text-file or --decode (command line)"));
  }
  auto tok = llm::Tokenizer::load(a.tokenizer);
  if (!tok) return fail(tok.status());
  if (!a.decode.empty()) {
    auto ids = parse_id_list(a.decode, "--decode");
    if (!ids) return fail(ids.status());
    std::string text = (*tok)->decode(*ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  std::vector<std::string> inputs;
  if (a.text_opt->count() > 0) {
    inputs.push_back(a.text);
  } else {
    std::ifstream in(a.text_file, std::ios::binary);
    if (!in) return fail(make_error(ErrorCode::kIoError, "cannot read --text-file ({})", a.text_file));
    std::string line;
    size_t lineno = 0;
    while (std::getline(in, line)) {  // split on '\n' only: U+2028 and friends arrive escaped
      ++lineno;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_string()) {
        return fail(make_error(ErrorCode::kInvalidInput, "line {} is not a JSON string ({})", lineno, a.text_file));
      }
      inputs.push_back(j.get<std::string>());
    }
  }
  std::string out;
  for (const auto& text : inputs) {
    auto ids = (*tok)->encode(text, !a.no_special);
    if (!ids) return fail(ids.status());
    for (size_t k = 0; k < ids->size(); ++k) fmt::format_to(std::back_inserter(out), "{}{}", k ? " " : "", (*ids)[k]);
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace hf2pte::cli
