// Audio for speech models: 16 kHz WAV files (PCM int16 or float32; several
// channels are averaged to mono; other rates are refused, not resampled) and
// Whisper's log-mel spectrogram as WhisperFeatureExtractor / openai-whisper
// compute it (periodic Hann window, centred reflect-padded STFT through FFTW,
// the last frame dropped, power spectrum, Slaney mel filters from the
// formula, log10 clamped at 1e-10 and to 8 decades below the maximum,
// (x + 4) / 4), in float64, stored as float32.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/host_tensor.h"
#include "core/status.h"

namespace hf2pte::pre {

struct Waveform {
  int64_t sample_rate = 0;
  std::vector<float> samples;  ///< mono, in [-1, 1): int16 / 32768
};

/// The longest audio accepted: one hour at 48 kHz.
constexpr int64_t kMaxAudioSamples = int64_t(48000) * 3600;

Result<Waveform> decode_wav(std::span<const uint8_t> bytes, const std::string& where);
Result<Waveform> read_wav(const std::string& path);

struct FeatureExtractorConfig {
  int64_t feature_size = 80;     ///< mel bins
  int64_t sampling_rate = 16000;
  int64_t n_fft = 400;
  int64_t hop_length = 160;
  int64_t n_samples = 480000;    ///< audio is zero-padded / trimmed to this (30 s)
};

/// preprocessor_config.json of a WhisperFeatureExtractor.
Result<FeatureExtractorConfig> parse_feature_extractor(const nlohmann::json& j, const std::string& where);

/// input_features f32 [1, feature_size, n_samples / hop_length].
Result<HostTensor> log_mel_features(const Waveform& audio, const FeatureExtractorConfig& c, const std::string& where);

}  // namespace hf2pte::pre
