#include "preprocess/audio.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numbers>

#include <fftw3.h>

#include "checkpoint/json_fields.h"

namespace hf2pte::pre {

namespace {

uint32_t u32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
uint16_t u16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }

// Slaney's mel scale (librosa's default, htk=False): linear below 1 kHz, log above.
constexpr double kMinLogHz = 1000.0, kMinLogMel = 15.0;
const double kLogStep = std::log(6.4) / 27.0;
double hz_to_mel(double f) { return f < kMinLogHz ? 3.0 * f / 200.0 : kMinLogMel + std::log(f / kMinLogHz) / kLogStep; }
double mel_to_hz(double m) { return m < kMinLogMel ? 200.0 * m / 3.0 : kMinLogHz * std::exp(kLogStep * (m - kMinLogMel)); }

/// librosa.filters.mel(sr, n_fft, n_mels, fmin 0, fmax sr / 2, norm "slaney"): [n_mels, 1 + n_fft / 2].
std::vector<double> mel_filters(int64_t sr, int64_t n_fft, int64_t n_mels) {
  const int64_t bins = 1 + n_fft / 2;
  std::vector<double> fft_hz(static_cast<size_t>(bins)), mel_hz(static_cast<size_t>(n_mels + 2));
  for (int64_t k = 0; k < bins; ++k) fft_hz[size_t(k)] = double(k) * double(sr) / double(n_fft);
  const double lo = hz_to_mel(0.0), hi = hz_to_mel(double(sr) / 2.0);
  for (int64_t i = 0; i < n_mels + 2; ++i) mel_hz[size_t(i)] = mel_to_hz(lo + (hi - lo) * double(i) / double(n_mels + 1));
  std::vector<double> w(static_cast<size_t>(n_mels * bins));
  for (int64_t m = 0; m < n_mels; ++m) {
    const double f0 = mel_hz[size_t(m)], f1 = mel_hz[size_t(m + 1)], f2 = mel_hz[size_t(m + 2)];
    const double norm = 2.0 / (f2 - f0);  // Slaney: each filter has unit area
    for (int64_t k = 0; k < bins; ++k) {
      const double f = fft_hz[size_t(k)];
      const double rising = (f - f0) / (f1 - f0), falling = (f2 - f) / (f2 - f1);
      w[size_t(m * bins + k)] = std::max(0.0, std::min(rising, falling)) * norm;
    }
  }
  return w;
}

}  // namespace

Result<Waveform> decode_wav(std::span<const uint8_t> b, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 && std::memcmp(b.data() + 8, "WAVE", 4) == 0,
                         kInvalidInput, "not a WAV file (no RIFF/WAVE header) ({})", where);
  int format = 0, channels = 0, bits = 0;
  int64_t rate = 0;
  std::span<const uint8_t> data;
  bool have_fmt = false, have_data = false;
  for (size_t pos = 12; pos + 8 <= b.size();) {
    const uint32_t size = u32(&b[pos + 4]);
    const uint8_t* body = &b[pos + 8];
    const size_t avail = b.size() - pos - 8;
    if (std::memcmp(&b[pos], "fmt ", 4) == 0) {
      HF2PTE_CHECK_OR_RETURN(size >= 16 && size <= avail, kInvalidInput, "bad WAV: truncated fmt chunk ({})", where);
      format = u16(body), channels = u16(body + 2), rate = u32(body + 4), bits = u16(body + 14);
      if (format == 0xFFFE && size >= 26) format = u16(body + 24);  // WAVE_FORMAT_EXTENSIBLE: the subformat
      have_fmt = true;
    } else if (std::memcmp(&b[pos], "data", 4) == 0) {
      HF2PTE_CHECK_OR_RETURN(size <= avail, kInvalidInput, "bad WAV: the data chunk says {} bytes, {} are there (truncated) ({})",
                             size, avail, where);
      data = b.subspan(pos + 8, size);
      have_data = true;
      break;
    }
    HF2PTE_CHECK_OR_RETURN(size <= avail, kInvalidInput, "bad WAV: truncated chunk ({})", where);
    pos += 8 + size + (size & 1);
  }
  HF2PTE_CHECK_OR_RETURN(have_fmt && have_data, kInvalidInput, "bad WAV: no fmt or data chunk ({})", where);
  const bool pcm16 = format == 1 && bits == 16, f32 = format == 3 && bits == 32;
  HF2PTE_CHECK_OR_RETURN(pcm16 || f32, kNotSupported,
                         "WAV sample format {} with {} bits is not supported; expected PCM int16 or float32 ({})", format,
                         bits, where);
  HF2PTE_CHECK_OR_RETURN(channels >= 1 && channels <= 16 && rate > 0 && rate <= 384000, kInvalidInput,
                         "bad WAV: {} channels at {} Hz ({})", channels, rate, where);
  const size_t frame = size_t(channels) * size_t(bits / 8);
  const int64_t n = int64_t(data.size() / frame);
  HF2PTE_CHECK_OR_RETURN(n > 0, kInvalidInput, "WAV file has no samples ({})", where);
  HF2PTE_CHECK_OR_RETURN(n <= kMaxAudioSamples, kInvalidInput, "WAV file too long: {} samples; at most {} ({})", n,
                         kMaxAudioSamples, where);
  Waveform w;
  w.sample_rate = rate;
  w.samples.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int c = 0; c < channels; ++c) {
      const uint8_t* p = data.data() + size_t(i) * frame + size_t(c) * size_t(bits / 8);
      if (pcm16) {
        sum += double(int16_t(u16(p))) / 32768.0;
      } else {
        float f;
        std::memcpy(&f, p, 4);
        sum += f;
      }
    }
    w.samples[size_t(i)] = float(sum / channels);  // several channels: their mean (ffmpeg -ac 1 does the same)
  }
  return w;
}

Result<Waveform> read_wav(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  HF2PTE_CHECK_OR_RETURN(in.good(), kNotFound, "cannot open file: {} ({})", std::strerror(errno), path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decode_wav(bytes, path);
}

Result<FeatureExtractorConfig> parse_feature_extractor(const nlohmann::json& j, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(j.is_object(), kInvalidInput, "{}: expected a JSON object, got {} ({})", json_label(where),
                         json_type_name(j), where);
  FeatureExtractorConfig c;
  for (auto [key, field] : {std::pair{"feature_size", &c.feature_size}, std::pair{"sampling_rate", &c.sampling_rate},
                            std::pair{"n_fft", &c.n_fft}, std::pair{"hop_length", &c.hop_length},
                            std::pair{"n_samples", &c.n_samples}}) {
    HF2PTE_ASSIGN_OR_RETURN(*field, get_int_or(j, key, *field, where));
    HF2PTE_CHECK_OR_RETURN(*field > 0 && *field <= kMaxAudioSamples, kInvalidInput,
                           "{}: field '{}' out of range; expected 1..{}, got {} ({})", json_label(where), key,
                           kMaxAudioSamples, *field, where);
  }
  HF2PTE_CHECK_OR_RETURN(c.n_fft >= 2 && c.n_fft <= 65536 && c.feature_size <= 1024, kInvalidInput,
                         "{}: n_fft {} or feature_size {} out of range ({})", json_label(where), c.n_fft, c.feature_size, where);
  return c;
}

Result<HostTensor> log_mel_features(const Waveform& audio, const FeatureExtractorConfig& c, const std::string& where) {
  HF2PTE_CHECK_OR_RETURN(audio.sample_rate == c.sampling_rate, kNotSupported,
                         "audio is {} Hz; the model takes {} Hz (resample it first, e.g. ffmpeg -ar {}) ({})",
                         audio.sample_rate, c.sampling_rate, c.sampling_rate, where);
  const int64_t N = c.n_fft, hop = c.hop_length, pad = N / 2, bins = N / 2 + 1;
  HF2PTE_CHECK_OR_RETURN(c.n_samples > pad, kInvalidInput, "n_samples {} is shorter than half a window ({})", c.n_samples, where);
  // Zero-pad or trim to n_samples, then centre: reflect-pad n_fft / 2 on both sides.
  std::vector<double> x(size_t(c.n_samples), 0.0);
  const size_t take = std::min(audio.samples.size(), x.size());
  for (size_t i = 0; i < take; ++i) x[i] = audio.samples[i];
  std::vector<double> padded(size_t(c.n_samples + 2 * pad));
  for (int64_t i = 0; i < c.n_samples; ++i) padded[size_t(i + pad)] = x[size_t(i)];
  for (int64_t i = 0; i < pad; ++i) {
    padded[size_t(pad - 1 - i)] = x[size_t(i + 1)];
    padded[size_t(c.n_samples + pad + i)] = x[size_t(c.n_samples - 2 - i)];
  }
  const int64_t frames = 1 + c.n_samples / hop - 1;  // the last STFT frame is dropped, as Whisper does
  std::vector<double> window(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) window[size_t(n)] = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * double(n) / double(N));
  const std::vector<double> filters = mel_filters(c.sampling_rate, N, c.feature_size);
  double* in = fftw_alloc_real(size_t(N));
  fftw_complex* out = fftw_alloc_complex(size_t(bins));
  fftw_plan plan = fftw_plan_dft_r2c_1d(int(N), in, out, FFTW_ESTIMATE);
  std::vector<double> mel(static_cast<size_t>(c.feature_size * frames)), power(static_cast<size_t>(bins));
  double peak = -1e300;
  for (int64_t t = 0; t < frames; ++t) {
    for (int64_t n = 0; n < N; ++n) in[n] = padded[size_t(t * hop + n)] * window[size_t(n)];
    fftw_execute(plan);
    for (int64_t k = 0; k < bins; ++k) power[size_t(k)] = out[k][0] * out[k][0] + out[k][1] * out[k][1];
    for (int64_t m = 0; m < c.feature_size; ++m) {
      double s = 0;
      for (int64_t k = 0; k < bins; ++k) s += filters[size_t(m * bins + k)] * power[size_t(k)];
      const double l = std::log10(std::max(s, 1e-10));
      mel[size_t(m * frames + t)] = l;
      peak = std::max(peak, l);
    }
  }
  fftw_destroy_plan(plan);
  fftw_free(in);
  fftw_free(out);
  HostTensor f{ScalarType::kFloat, {1, c.feature_size, frames}, {}};
  f.bytes.resize(mel.size() * sizeof(float));
  float* y = f.data<float>();
  for (size_t i = 0; i < mel.size(); ++i) y[i] = float((std::max(mel[i], peak - 8.0) + 4.0) / 4.0);
  return f;
}

}  // namespace hf2pte::pre
