// The elementwise engine shared by the arithmetic, comparison and selection
// kernels: ATen type promotion and a broadcasting loop over typed operands.
#pragma once

#include <tuple>
#include <utility>

#include "kernels/portable/kernel_util.h"

namespace hf2pte::kernels {

/// ATen's result type of two tensors within f32 / f16 / bf16 / i64 / bool: the
/// higher of the categories bool < integer < floating wins; two different float
/// types give f32.
ScalarType promote_types(ScalarType a, ScalarType b);

/// ATen's result type of a tensor and a Python number: a float number lifts an
/// integer or bool tensor to f32 (the default dtype); an int lifts bool to i64.
ScalarType promote_with_scalar(ScalarType t, const ScalarArg& s);

/// Input dtypes that can be loaded into compute type CT (promotion guarantees
/// inputs never need a narrowing load).
template <typename CT>
inline constexpr DTypeSet kInputsFor =
    std::is_same_v<CT, float> ? kStandard
    : std::is_same_v<CT, int64_t> ? DTypeSet{ScalarType::kLong, ScalarType::kBool}
                                  : DTypeSet{ScalarType::kBool};

/// Out dtypes a result of type R may be written to (ATen's canCast: no
/// float -> integer, no number -> bool).
template <typename R>
inline constexpr DTypeSet kOutsFor =
    std::is_same_v<R, float> ? kFloating
    : std::is_same_v<R, int64_t> ? DTypeSet{ScalarType::kLong} | kFloating
                                 : kStandard;

namespace detail {

template <typename O, typename... In, typename Fn, size_t... I>
void run_loop(std::index_sequence<I...>, std::span<const int64_t> shape, rt::Tensor& out,
              const std::array<const rt::Tensor*, sizeof...(In)>& ins, Fn& fn) {
  constexpr size_t N = sizeof...(In) + 1;
  std::array<DimArray, N> st{};
  st[0] = strides_of(out);
  ((st[I + 1] = broadcast_strides(*ins[I], shape)), ...);
  O* po = out.data<O>();
  const std::tuple<const In*...> ptrs{ins[I]->template data<In>()...};
  for_each_offset<N>(shape, st, [&](const std::array<int64_t, N>& o) {
    po[o[0]] = fn(load(std::get<I>(ptrs) + o[I + 1])...);
  });
}

}  // namespace detail

/// out[idx] = fn(in0[idx'], in1[idx''], ...) over the broadcast `shape`, with
/// operands already typed (O, In...). `out` must already have `shape`.
template <typename O, typename... In, typename Fn>
void run_loop(std::span<const int64_t> shape, rt::Tensor& out,
              const std::array<const rt::Tensor*, sizeof...(In)>& ins, Fn fn) {
  detail::run_loop<O, In...>(std::index_sequence_for<In...>{}, shape, out, ins, fn);
}

/// Unary map in compute type CT: out = fn(CT(x)); out is resized to x's shape.
template <typename CT, typename Fn>
Status map_unary(OpId op, const rt::Tensor& x, rt::Tensor& out, Fn fn) {
  using R = decltype(fn(CT{}));
  HF2PTE_RETURN_IF_ERROR(resize_out(out, x.sizes(), op));
  return dispatch<kInputsFor<CT>>(x.dtype(), op, "self", [&](auto tx) {
    using X = typename decltype(tx)::type;
    return dispatch<kOutsFor<R>>(out.dtype(), op, "out", [&](auto to) {
      using O = typename decltype(to)::type;
      run_loop<O, X>(x.sizes(), out, {&x},
                     [&](X v) { return convert<O>(fn(convert<CT>(v))); });
    });
  });
}

/// Broadcasting binary map in compute type CT: out = fn(CT(a), CT(b)).
template <typename CT, typename Fn>
Status map_binary(OpId op, const rt::Tensor& a, const rt::Tensor& b, rt::Tensor& out, Fn fn) {
  using R = decltype(fn(CT{}, CT{}));
  std::vector<int64_t> shape;
  const std::span<const int64_t> shapes[] = {a.sizes(), b.sizes()};
  HF2PTE_RETURN_IF_ERROR(broadcast_shapes(shapes, op, &shape));
  HF2PTE_RETURN_IF_ERROR(resize_out(out, shape, op));
  return dispatch<kInputsFor<CT>>(a.dtype(), op, "self", [&](auto ta) {
    using A = typename decltype(ta)::type;
    return dispatch<kInputsFor<CT>>(b.dtype(), op, "other", [&](auto tb) {
      using B = typename decltype(tb)::type;
      return dispatch<kOutsFor<R>>(out.dtype(), op, "out", [&](auto to) {
        using O = typename decltype(to)::type;
        run_loop<O, A, B>(shape, out, {&a, &b}, [&](A x, B y) {
          return convert<O>(fn(convert<CT>(x), convert<CT>(y)));
        });
      });
    });
  });
}

}  // namespace hf2pte::kernels
