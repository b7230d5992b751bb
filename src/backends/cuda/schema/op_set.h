// The ops a CUDA delegate may hold: the partitioner claims exactly these, the
// CPU reference executor runs them on the portable kernels and the device
// executor has a CUDA kernel for each (runtime/device/ops.cu; its table is
// checked against this list by a test). Adding an op: a row here, a device
// kernel, and a case in runtime/test/device_test.cpp.
#pragma once

#include <algorithm>
#include <iterator>

#include "ops/op_table.h"

namespace hf2pte::cuda {

inline constexpr OpId kCudaOps[] = {
    // elementwise (broadcasting), computed in f32, rounded once to the out dtype
    OpId::AddOut, OpId::AddScalarOut, OpId::SubOut, OpId::MulOut, OpId::MulScalarOut, OpId::DivOut, OpId::NegOut,
    OpId::RsqrtOut, OpId::SigmoidOut, OpId::TanhOut, OpId::ErfOut, OpId::ExpOut, OpId::Log1pOut, OpId::ClampOut,
    OpId::MaximumOut, OpId::PowTensorScalarOut, OpId::LeTensorOut, OpId::LtTensorOut, OpId::GtTensorOut,
    OpId::GeTensorOut, OpId::EqTensorOut, OpId::WhereSelfOut,
    // reductions over one or more dims
    OpId::MeanOut, OpId::SumIntListOut, OpId::AmaxOut, OpId::SoftmaxOut,
    // matrix products (cuBLAS, f32 accumulation)
    OpId::MmOut, OpId::BmmOut, OpId::AddmmOut,
    // indexing
    OpId::EmbeddingOut, OpId::IndexSelectOut, OpId::IndexPut_,
    // data movement (one strided-copy kernel)
    OpId::ViewCopyOut, OpId::PermuteCopyOut, OpId::SliceCopyTensorOut, OpId::CatOut, OpId::CloneOut,
    OpId::ToDimOrderCopyOut, OpId::ExpandCopyOut,
    // vision and audio front ends: 2-D convolution (ViT patches, ResNet, Whisper's conv1d as H = 1), max pooling
    OpId::ConvolutionOut, OpId::MaxPool2dWithIndicesOut,
    // quantized programs (--qlinear / --qembedding): upstream's quantized_decomposed ops
    OpId::ChooseQparamsPerTokenAsymmetricOut, OpId::QuantizePerTokenOut, OpId::DequantizePerTokenOut,
    OpId::MixedLinearOut, OpId::EmbeddingByteOut, OpId::Embedding4bitOut,
};

inline bool cuda_supports(OpId op) { return std::find(std::begin(kCudaOps), std::end(kCudaOps), op) != std::end(kCudaOps); }

}  // namespace hf2pte::cuda
