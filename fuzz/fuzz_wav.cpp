// libFuzzer target: WAV files (transcribe / preprocess read user audio):
// decoding, then Whisper's log-mel features of a short window.
#include <cstdint>
#include <span>

#include "preprocess/audio.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto wav = hf2pte::pre::decode_wav(std::span<const uint8_t>(data, size), "fuzz.wav");
  if (wav.is_ok()) {
    hf2pte::pre::FeatureExtractorConfig c;
    c.sampling_rate = wav->sample_rate;
    c.n_samples = 1600;
    (void)hf2pte::pre::log_mel_features(*wav, c, "fuzz.wav");
  }
  return 0;
}
