// The process's peak resident memory, for the stats lines of export and bench.
#pragma once

namespace hf2pte {

/// Peak RSS in MiB: the kernel's high-water mark (VmHWM), which counts from
/// the last reset_peak_rss(); the whole process's peak (getrusage) where
/// /proc is not readable.
double peak_rss_mib();

/// Resets the high-water mark (Linux >= 4.0 takes "5" in /proc/self/clear_refs),
/// so a later peak_rss_mib() leaves out what came before. False where it cannot.
bool reset_peak_rss();

}  // namespace hf2pte
