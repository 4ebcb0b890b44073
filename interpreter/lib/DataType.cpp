//===- DataType.cpp - Names of element types and reduction operators ------===//

#include "coll/interpreter/DataType.h"

#include "llvm/ADT/StringSwitch.h"

namespace coll::interp {

llvm::StringRef dataTypeName(DataType type) {
  switch (type) {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind)                                  \
  case DataType::Enum:                                                         \
    return Name;
#include "coll/interpreter/DataTypes.def"
  }
  return "?";
}

std::optional<DataType> parseDataType(llvm::StringRef name) {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind)                                  \
  if (name == Name)                                                            \
    return DataType::Enum;
#include "coll/interpreter/DataTypes.def"
  return llvm::StringSwitch<std::optional<DataType>>(name)
      .Cases("char", "int8_t", DataType::Int8)
      .Case("uint8_t", DataType::Uint8)
      .Cases("int", "int32_t", DataType::Int32)
      .Case("uint32_t", DataType::Uint32)
      .Case("int64_t", DataType::Int64)
      .Case("uint64_t", DataType::Uint64)
      .Cases("half", "float16", DataType::Float16)
      .Case("bfloat16", DataType::BFloat16)
      .Cases("float", "float32", DataType::Float32)
      .Cases("double", "float64", DataType::Float64)
      .Default(std::nullopt);
}

size_t dataTypeSize(DataType type) {
  return visitDataType(type, [](auto tag) { return sizeof(typename decltype(tag)::type); });
}

TypeKind dataTypeKind(DataType type) {
  switch (type) {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind)                                  \
  case DataType::Enum:                                                         \
    return TypeKind::Kind;
#include "coll/interpreter/DataTypes.def"
  }
  return TypeKind::Float;
}

llvm::StringRef reduceOpName(ReduceOp op) {
  switch (op) {
#define COLL_REDUCE_OP(Enum, Name)                                               \
  case ReduceOp::Enum:                                                         \
    return Name;
#include "coll/interpreter/DataTypes.def"
  }
  return "?";
}

std::optional<ReduceOp> parseReduceOp(llvm::StringRef name) {
#define COLL_REDUCE_OP(Enum, Name)                                               \
  if (name == Name)                                                            \
    return ReduceOp::Enum;
#include "coll/interpreter/DataTypes.def"
  return std::nullopt;
}

} // namespace coll::interp
