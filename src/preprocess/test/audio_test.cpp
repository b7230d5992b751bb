// WAV decoding and Whisper's log-mel features against the whisper-logmel
// fixture (openai/whisper's log_mel_spectrogram in float64, cross-checked by
// scipy's STFT): the 32-frame and the standard 30 s configuration within 1e-4;
// bad files and a wrong rate are one error each.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "checkpoint/json_fields.h"
#include "checkpoint/npy.h"
#include "preprocess/audio.h"

namespace hf2pte::pre {
namespace {

std::string fixture(const std::string& f) { return std::string(HF2PTE_SOURCE_DIR) + "/tests/data/fixtures/whisper-logmel/" + f; }

double max_diff(const HostTensor& a, const HostTensor& b) {
  EXPECT_EQ(a.sizes, b.sizes);
  double d = 0;
  for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i) d = std::max(d, double(std::fabs(a.data<float>()[i] - b.data<float>()[i])));
  return d;
}

TEST(LogMel, WhisperFixture) {
  auto wav = read_wav(fixture("audio.wav"));
  ASSERT_TRUE(wav.is_ok()) << wav.status().message();
  EXPECT_EQ(wav->sample_rate, 16000);
  EXPECT_EQ(wav->samples.size(), 6400u);
  auto j = read_json_object_file(fixture("preprocessor_config.json"));
  ASSERT_TRUE(j.is_ok());
  auto cfg = parse_feature_extractor(*j, "preprocessor_config.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  auto full = log_mel_features(*wav, *cfg, "audio.wav");
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  auto ref30 = read_npy(fixture("input_features_30s.npy"));
  ASSERT_TRUE(ref30.is_ok());
  EXPECT_LE(max_diff(*full, *ref30), 1e-4);
  // The tiny model's input: the first 5120 samples (32 frames).
  cfg->n_samples = 5120;
  auto short_f = log_mel_features(*wav, *cfg, "audio.wav");
  ASSERT_TRUE(short_f.is_ok());
  auto ref = read_npy(fixture("input_features.npy"));
  ASSERT_TRUE(ref.is_ok());
  EXPECT_LE(max_diff(*short_f, *ref), 1e-4);
}

TEST(Wav, BadFilesAndRates) {
  std::ifstream in(fixture("audio.wav"), std::ios::binary);
  std::vector<uint8_t> wav((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  struct Case {
    std::vector<uint8_t> bytes;
    const char* expected;
  };
  std::vector<Case> cases = {
      {std::vector<uint8_t>(wav.begin(), wav.begin() + long(wav.size() / 2)), "truncated"},
      {std::vector<uint8_t>(wav.begin(), wav.begin() + 30), "bad WAV"},
      {{'R', 'I', 'F', 'F'}, "not a WAV file"},
      {{}, "not a WAV file"},
  };
  auto eight_bit = wav;
  eight_bit[34] = 8;  // bits per sample
  cases.push_back({eight_bit, "not supported"});
  for (const auto& c : cases) {
    auto r = decode_wav(c.bytes, "in.wav");
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("(in.wav)"), std::string::npos) << r.status().message();
  }
  auto ok = decode_wav(wav, "in.wav");
  ASSERT_TRUE(ok.is_ok());
  ok->sample_rate = 44100;
  auto wrong_rate = log_mel_features(*ok, FeatureExtractorConfig{}, "in.wav");
  ASSERT_FALSE(wrong_rate.is_ok());
  EXPECT_NE(wrong_rate.status().message().find("44100 Hz"), std::string::npos) << wrong_rate.status().message();
}

}  // namespace
}  // namespace hf2pte::pre
