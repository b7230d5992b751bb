// NumPy .npy files: the exchange format of `hf2pte run` (inputs and outputs)
// and of the reference fixtures (input_ids.npy, logits.npy).
//
// Format (numpy/lib/format.py): "\x93NUMPY", major, minor, header length
// (u16 LE in 1.0, u32 LE in 2.0/3.0), a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (10, 320), }
// padded with spaces and a final '\n', then the raw elements.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "core/status.h"

namespace hf2pte {

/// Reads a .npy file. Accepts format versions 1.0, 2.0 and 3.0, C order only,
/// little-endian (or byte-order-free) dtypes: '<f4' (kFloat), '<f8' (kDouble),
/// '<f2' (kHalf), '<i8' (kLong), '<i4' (kInt), '<i2' (kShort), '|i1' (kChar),
/// '|u1' (kByte), '|b1' (kBool). The data must be exactly numel * itemsize
/// bytes and booleans must be 0 or 1. Errors: kNotFound/kIoError when the file
/// cannot be read; kInvalidInput when it is malformed; kNotSupported for valid
/// files we do not read (Fortran order, big-endian, other dtypes).
Result<HostTensor> read_npy(const std::string& path);

/// Parses the bytes of a .npy file; `where` names it in errors.
Result<HostTensor> parse_npy(std::span<const uint8_t> bytes, const std::string& where);

/// The bytes numpy.save writes for `tensor`: version 1.0 (2.0 when the header
/// does not fit 1.0's 16-bit length), keys sorted, numpy's spare space for
/// growing the first axis, padded with spaces to a multiple of 64 bytes and
/// ending in '\n'. kNotSupported for dtypes numpy has no descr for (bf16, ...);
/// kInvalidArgument when bytes.size() does not match sizes and dtype.
Result<std::vector<uint8_t>> encode_npy(const HostTensor& tensor);

/// Writes encode_npy(tensor) to `path` atomically: a temporary file in the same
/// folder, then rename(), so a reader never sees a partial file and a failed
/// write leaves nothing behind.
Status write_npy(const std::string& path, const HostTensor& tensor);

}  // namespace hf2pte
