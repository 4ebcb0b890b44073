//===- DataType.h - Element types and reduction operators -------*- C++ -*-===//

#ifndef COLL_INTERPRETER_DATATYPE_H
#define COLL_INTERPRETER_DATATYPE_H

#include "coll/interpreter/Float16.h"

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

namespace coll::interp {

enum class DataType : uint8_t {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind) Enum,
#include "coll/interpreter/DataTypes.def"
};

enum class ReduceOp : uint8_t {
#define COLL_REDUCE_OP(Enum, Name) Enum,
#include "coll/interpreter/DataTypes.def"
};

enum class TypeKind : uint8_t { Signed, Unsigned, Float };

llvm::StringRef dataTypeName(DataType type);
/// Accepts the names in DataTypes.def and nccl-tests' spellings (float,
/// double, half, bfloat16, int, ...).
std::optional<DataType> parseDataType(llvm::StringRef name);
size_t dataTypeSize(DataType type);
TypeKind dataTypeKind(DataType type);

llvm::StringRef reduceOpName(ReduceOp op);
std::optional<ReduceOp> parseReduceOp(llvm::StringRef name);

template <class T> struct TypeTag { using type = T; };

/// Calls fn(TypeTag<CType>{}) for the C++ type of `type` and returns its result.
template <class Fn> decltype(auto) visitDataType(DataType type, Fn &&fn) {
  switch (type) {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind)                                  \
  case DataType::Enum:                                                         \
    return std::forward<Fn>(fn)(TypeTag<CType>{});
#include "coll/interpreter/DataTypes.def"
  }
  return std::forward<Fn>(fn)(TypeTag<float>{}); // unreachable for valid enums
}

} // namespace coll::interp

#endif // COLL_INTERPRETER_DATATYPE_H
