#include "runtime/evalue.h"

namespace hf2pte::rt {

const char* tag_name(Tag t) {
  switch (t) {
    case Tag::kNone: return "None";
    case Tag::kInt: return "Int";
    case Tag::kDouble: return "Double";
    case Tag::kBool: return "Bool";
    case Tag::kString: return "String";
    case Tag::kTensor: return "Tensor";
    case Tag::kIntList: return "IntList";
    case Tag::kDoubleList: return "DoubleList";
    case Tag::kBoolList: return "BoolList";
    case Tag::kTensorList: return "TensorList";
    case Tag::kOptionalTensorList: return "OptionalTensorList";
  }
  return "?";
}

namespace {

Status mismatch(const char* what, const char* expected, const EValue* v) {
  return make_error(ErrorCode::kInvalidProgram, "{}: expected {}, got {}", what, expected,
                    v ? tag_name(v->tag) : "nothing");
}

}  // namespace

Result<Tensor*> arg_tensor(EValue* v, const char* what) {
  if (!v || v->tag != Tag::kTensor || !v->tensor) return mismatch(what, "Tensor", v);
  return v->tensor;
}

Result<int64_t> arg_int(EValue* v, const char* what) {
  if (!v || v->tag != Tag::kInt) return mismatch(what, "Int", v);
  return v->i;
}

Result<double> arg_double(EValue* v, const char* what) {
  if (!v || (v->tag != Tag::kDouble && v->tag != Tag::kInt)) return mismatch(what, "Double", v);
  return v->scalar_as_double();
}

Result<bool> arg_bool(EValue* v, const char* what) {
  if (!v || v->tag != Tag::kBool) return mismatch(what, "Bool", v);
  return v->i != 0;
}

Status arg_int_list(EValue* v, const char* what, std::vector<int64_t>* out, bool optional, bool* is_none) {
  out->clear();
  if (is_none) *is_none = false;
  if (v && v->tag == Tag::kNone && optional) {
    if (is_none) *is_none = true;
    return Status::ok();
  }
  if (!v || v->tag != Tag::kIntList) return mismatch(what, optional ? "IntList or None" : "IntList", v);
  out->reserve(v->items.size());
  for (size_t k = 0; k < v->items.size(); ++k) {
    // Boxed list: every item is an Int EValue (the loader checked this, but a
    // kernel may have overwritten a slot since).
    const EValue* item = v->items[k];
    if (!item || item->tag != Tag::kInt) {
      return make_error(ErrorCode::kInvalidProgram, "{}: item {} of IntList is {}, expected Int", what, k,
                        item ? tag_name(item->tag) : "missing");
    }
    out->push_back(item->i);
  }
  return Status::ok();
}

Status arg_tensor_list(EValue* v, const char* what, std::vector<Tensor*>* out) {
  out->clear();
  if (!v || (v->tag != Tag::kTensorList && v->tag != Tag::kOptionalTensorList)) {
    return mismatch(what, "TensorList", v);
  }
  const bool optional = v->tag == Tag::kOptionalTensorList;
  out->reserve(v->items.size());
  for (size_t k = 0; k < v->items.size(); ++k) {
    EValue* item = v->items[k];
    if (optional && (!item || item->tag == Tag::kNone)) {
      out->push_back(nullptr);
      continue;
    }
    if (!item || item->tag != Tag::kTensor || !item->tensor) {
      return make_error(ErrorCode::kInvalidProgram, "{}: item {} of {} is {}, expected Tensor", what, k,
                        tag_name(v->tag), item ? tag_name(item->tag) : "missing");
    }
    out->push_back(item->tensor);
  }
  return Status::ok();
}

}  // namespace hf2pte::rt
