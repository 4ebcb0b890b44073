//===- InterpBuiltins.cpp - Built-ins and chunk references ----------------===//
//
// Interp's built-in functions (chunk, scratch, len, assert, provide,
// expect, contrib), the methods of chunk references that trace operations
// (copy, reduce, put, get, get_reduce) or make new references (split,
// group), their properties, and the range checks of ranks, indices and
// references.
//
//===----------------------------------------------------------------------===//

#include "Interp.h"

using namespace coll;
using namespace coll::lang;
using namespace coll::lang::ast;

std::optional<Value> Interp::evalBuiltin(Builtin builtin,
                                         const CallExpr &call, Frame &frame,
                                         bool wantValue) {
  Args args = bind(call.args);
  bool returnsValue = builtin != Builtin::Assert &&
                      builtin != Builtin::Provide &&
                      builtin != Builtin::Expect;
  if (wantValue && !returnsValue)
    return fail(call.loc, "'" + call.callee + "' returns no value");
  switch (builtin) {
  case Builtin::Chunk: {
    if (phase != Phase::Body)
      return fail(call.loc,
                  "chunk operations are not allowed in pre and post blocks");
    if (!tracer.declared()) {
      diags.error(call.loc,
                  "'chunk' is used before the collective is declared");
      if (collective)
        diags.note(collective->loc, "the collective is declared here");
      return std::nullopt;
    }
    std::optional<int32_t> rank = evalRank(*args[0], frame);
    std::optional<BufferId> buffer =
        rank ? evalAs<BufferId>(*args[1], frame) : std::nullopt;
    std::optional<int64_t> index =
        buffer ? evalAs<int64_t>(*args[2], frame) : std::nullopt;
    if (!index)
      return std::nullopt;
    int64_t size = 1;
    if (args[3]) {
      std::optional<int64_t> value = evalAs<int64_t>(*args[3], frame);
      if (!value)
        return std::nullopt;
      if (*value < 1)
        return fail(args[3]->loc,
                    "size must be at least 1, got " + llvm::Twine(*value));
      size = *value;
    }
    std::optional<SlotRange> ref = makeRef(*rank, *buffer, *index, size,
                                           *args[2], /*destination=*/false);
    return ref ? std::optional<Value>(Value(*ref)) : std::nullopt;
  }
  case Builtin::Scratch: {
    // A name or an integer key (`scratch(3)` is `scratch("3")`), so that
    // programs can compute buffer names.
    std::optional<Value> key = eval(*args[0], frame);
    if (!key)
      return std::nullopt;
    std::optional<std::string> name;
    if (const int64_t *number = key->get<int64_t>())
      name = std::to_string(*number);
    else if (const std::string *text = key->get<std::string>())
      name = *text;
    else
      return fail(args[0]->loc, "a scratch buffer is named by a string or "
                                "an integer, got " +
                                    typeName(*key));
    if (name->empty())
      return fail(args[0]->loc, "a scratch buffer needs a non-empty name");
    return Value(tracer.scratch(*name));
  }
  case Builtin::Len: {
    std::optional<ListPtr> list = evalAs<ListPtr>(*args[0], frame);
    return list ? std::optional<Value>(Value(int64_t((*list)->size())))
                : std::nullopt;
  }
  case Builtin::Assert: {
    std::optional<bool> cond = evalAs<bool>(*args[0], frame);
    if (!cond)
      return std::nullopt;
    std::string message;
    if (args[1]) {
      std::optional<std::string> text = evalAs<std::string>(*args[1], frame);
      if (!text)
        return std::nullopt;
      message = ": " + *text;
    }
    if (!*cond)
      return fail(call.loc, "assertion failed" + message);
    return Value();
  }
  case Builtin::Provide:
  case Builtin::Expect: {
    bool provide = builtin == Builtin::Provide;
    if (phase != (provide ? Phase::Pre : Phase::Post))
      return fail(call.loc, "'" + call.callee +
                                "' may only be called in the " +
                                (provide ? "pre" : "post") +
                                " block of a custom collective");
    const CollectiveSpec &spec = tracer.spec();
    std::optional<int32_t> rank = evalRank(*args[0], frame);
    std::optional<int32_t> index =
        rank ? evalIndex(*args[1], frame, provide ? "input" : "output",
                         provide ? spec.inputChunks : spec.outputChunks)
             : std::nullopt;
    if (!index)
      return std::nullopt;
    if (provide) {
      tracer.provide(*rank, *index);
      return Value();
    }
    std::optional<Contribution> contrib =
        evalAs<Contribution>(*args[2], frame);
    if (!contrib ||
        !tracer.expect(*rank, *index,
                       contrib->rank * spec.inputChunks + contrib->index,
                       call.loc))
      return std::nullopt;
    return Value();
  }
  case Builtin::Contrib: {
    if (!tracer.declared())
      return fail(call.loc,
                  "'contrib' is used before the collective is declared");
    std::optional<int32_t> rank = evalRank(*args[0], frame);
    std::optional<int32_t> index =
        rank ? evalIndex(*args[1], frame, "input", tracer.spec().inputChunks)
             : std::nullopt;
    if (!index)
      return std::nullopt;
    return Value(Contribution{*rank, *index});
  }
  }
  return std::nullopt;
}

std::optional<int32_t> Interp::evalRank(const Expr &expr, Frame &frame) {
  std::optional<int64_t> rank = evalAs<int64_t>(expr, frame);
  if (!rank)
    return std::nullopt;
  int32_t nranks = tracer.spec().nranks;
  if (*rank < 0 || *rank >= nranks)
    return fail(expr.loc, "rank " + llvm::Twine(*rank) +
                              " is out of range (program has " +
                              llvm::Twine(nranks) + " ranks)");
  return static_cast<int32_t>(*rank);
}

std::optional<int32_t> Interp::evalIndex(const Expr &expr, Frame &frame,
                                         llvm::StringRef buffer,
                                         int32_t chunks) {
  std::optional<int64_t> index = evalAs<int64_t>(expr, frame);
  if (!index)
    return std::nullopt;
  if (*index < 0 || *index >= chunks)
    return fail(expr.loc, "index " + llvm::Twine(*index) +
                              " is out of range (" + buffer + " has " +
                              llvm::Twine(chunks) + " chunks)");
  return static_cast<int32_t>(*index);
}

std::optional<SlotRange> Interp::makeRef(int32_t rank, BufferId buffer,
                                         int64_t index, int64_t size,
                                         const Expr &indexExpr,
                                         bool destination) {
  const CollectiveSpec &spec = tracer.spec();
  bool scratch = buffer.kind == ir::BufferKind::Scratch;
  int64_t chunks = scratch ? limits::MaxScratchChunks
                   : buffer.kind == ir::BufferKind::Input ? spec.inputChunks
                                                          : spec.outputChunks;
  std::string bound = formatBuffer(buffer, tracer.scratchNames()) +
                      (scratch ? " has at most " : " has ") +
                      std::to_string(chunks) + " chunks)";
  std::string what = destination ? "destination " : "";
  if (index < 0 || index >= chunks)
    return fail(indexExpr.loc, what + "index " + llvm::Twine(index) +
                                   " is out of range (" + bound);
  if (size > chunks - index) {
    int64_t end;
    std::string range = __builtin_add_overflow(index, size, &end)
                            ? "size " + std::to_string(size) + " is"
                            : "chunks " + std::to_string(index) + ".." +
                                  std::to_string(end) + " are";
    return fail(indexExpr.loc, what + range + " out of range (" + bound);
  }
  if (!tick(indexExpr.loc, static_cast<uint64_t>(size)))
    return std::nullopt;
  return SlotRange{rank, buffer, static_cast<int32_t>(index),
                   static_cast<int32_t>(size)};
}

std::optional<int32_t> Interp::evalHint(const Expr *expr, Frame &frame,
                                        llvm::StringRef name) {
  if (!expr)
    return -1;
  std::optional<Value> value = eval(*expr, frame);
  if (!value)
    return std::nullopt;
  if (value->get<AutoHint>())
    return -1;
  const int64_t *hint = value->get<int64_t>();
  if (!hint)
    return fail(expr->loc, name + " must be an integer or auto, got " +
                               typeName(*value));
  if (*hint < 0 || *hint > INT32_MAX)
    return fail(expr->loc, name + " must be between 0 and " +
                               llvm::Twine(INT32_MAX) + " (or auto), got " +
                               llvm::Twine(*hint));
  return static_cast<int32_t>(*hint);
}

std::optional<Value> Interp::evalMethod(const MethodExpr &method,
                                        Frame &frame) {
  std::optional<SlotRange> self = evalAs<SlotRange>(*method.receiver, frame);
  if (!self)
    return std::nullopt;
  Args args = bind(method.args);
  const Signature &sig = signature(method.method);
  switch (method.method) {
  case Method::Copy:
  case Method::Reduce:
  case Method::Put:
  case Method::Get:
  case Method::GetReduce: {
    bool copy = method.method == Method::Copy || method.method == Method::Put;
    ChunkOp op;
    op.kind = method.method == Method::Reduce ||
                      method.method == Method::GetReduce
                  ? OpKind::Reduce
                  : OpKind::Copy;
    op.direct = method.method == Method::Put ? Direct::Put
                : method.method == Method::Get ||
                        method.method == Method::GetReduce
                    ? Direct::Get
                    : Direct::None;
    op.loc = method.nameLoc;
    op.call = currentCall();
    op.parallel = parallel;
    Tracer::Sites sites{method.nameLoc, {}, {}};
    if (copy) {
      std::optional<int32_t> rank = evalRank(*args[0], frame);
      std::optional<BufferId> buffer =
          rank ? evalAs<BufferId>(*args[1], frame) : std::nullopt;
      // Without an index a copy to a scratch buffer appends to it.
      std::optional<int64_t> index;
      if (buffer && args[2])
        index = evalAs<int64_t>(*args[2], frame);
      else if (buffer && buffer->kind == ir::BufferKind::Scratch)
        index = tracer.scratchEnd(*rank, *buffer);
      else if (buffer)
        return fail(method.nameLoc,
                    llvm::Twine(copy && op.direct == Direct::Put ? "put"
                                                                  : "copy") +
                        " needs an index into " +
                        llvm::Twine(buffer->kind == ir::BufferKind::Input
                                        ? "input"
                                        : "output") +
                        " (only a " +
                        (op.direct == Direct::Put ? "put" : "copy") +
                        " to a scratch buffer may leave it out, to "
                        "append)");
      std::optional<SlotRange> dst =
          index ? makeRef(*rank, *buffer, *index, self->size,
                          args[2] ? *args[2] : *args[1],
                          /*destination=*/true)
                : std::nullopt;
      if (!dst)
        return std::nullopt;
      op.src = *self;
      op.dst = *dst;
      sites.src = method.receiver->loc;
      sites.dst = args[1]->loc;
    } else {
      std::optional<SlotRange> other = evalAs<SlotRange>(*args[0], frame);
      if (!other)
        return std::nullopt;
      if (other->size != self->size)
        return fail(method.nameLoc,
                    llvm::Twine("size mismatch: cannot ") +
                        (op.direct == Direct::Get ? "get " : "reduce ") +
                                        llvm::Twine(other->size) +
                                        " chunks into " +
                                        llvm::Twine(self->size));
      op.src = *other;
      op.dst = *self;
      sites.src = args[0]->loc;
      sites.dst = method.receiver->loc;
    }
    if (op.direct != Direct::None && op.src.rank == op.dst.rank)
      return fail(method.nameLoc,
                  llvm::Twine(method.method == Method::Put   ? "put"
                              : method.method == Method::Get ? "get"
                                                             : "get_reduce") +
                      " reaches another rank's memory, but " +
                      describe(op.src) + " and " + describe(op.dst) +
                      " are both on rank " + llvm::Twine(op.src.rank) +
                      ": use " + (op.kind == OpKind::Copy ? "copy" : "reduce"));
    const unsigned hint = sig.numPositional;
    std::optional<int32_t> channel = evalHint(args[hint], frame, "ch");
    if (!channel)
      return std::nullopt;
    op.channel = *channel;
    if (op.direct != Direct::None) {
      // `tb=` names the tb of the rank that runs the operation.
      std::optional<int32_t> tb = evalHint(args[hint + 1], frame, "tb");
      if (!tb)
        return std::nullopt;
      (op.direct == Direct::Put ? op.sendTb : op.recvTb) = *tb;
    } else {
      std::optional<int32_t> sendTb =
          evalHint(args[hint + 1], frame, "sendtb");
      std::optional<int32_t> recvTb =
          sendTb ? evalHint(args[hint + 2], frame, "recvtb") : std::nullopt;
      if (!recvTb)
        return std::nullopt;
      op.sendTb = *sendTb;
      op.recvTb = *recvTb;
    }
    SlotRange result = op.dst;
    if (!tracer.record(std::move(op), sites))
      return std::nullopt;
    return Value(result);
  }
  case Method::Split: {
    std::optional<int64_t> parts = evalAs<int64_t>(*args[0], frame);
    if (!parts)
      return std::nullopt;
    if (*parts < 1 || self->size % *parts != 0)
      return fail(args[0]->loc, "cannot split " + llvm::Twine(self->size) +
                                    (self->size == 1 ? " chunk" : " chunks") +
                                    " into " + llvm::Twine(*parts) +
                                    " equal parts");
    if (!tick(method.nameLoc, static_cast<uint64_t>(*parts)))
      return std::nullopt;
    auto list = std::make_shared<std::vector<Value>>();
    int32_t partSize = self->size / static_cast<int32_t>(*parts);
    for (int32_t i = 0; i < *parts; ++i)
      list->push_back(Value(SlotRange{self->rank, self->buffer,
                                      self->index + i * partSize, partSize}));
    return Value(ListPtr(std::move(list)));
  }
  case Method::Group: {
    std::optional<SlotRange> other = evalAs<SlotRange>(*args[0], frame);
    if (!other)
      return std::nullopt;
    SlotRange next{self->rank, self->buffer, self->index + self->size, 1};
    if (other->rank != next.rank || other->buffer != next.buffer ||
        other->index != next.index)
      return fail(args[0]->loc,
                  "cannot group " + describe(*self) + " with " +
                      describe(*other) +
                      ": the second must start where the first ends, at " +
                      describe(next));
    return Value(SlotRange{self->rank, self->buffer, self->index,
                           self->size + other->size});
  }
  }
  return std::nullopt;
}

std::optional<Value> Interp::evalMember(const MemberExpr &member,
                                        Frame &frame) {
  std::optional<SlotRange> self = evalAs<SlotRange>(*member.receiver, frame);
  if (!self)
    return std::nullopt;
  llvm::StringRef name = member.name;
  int32_t inputChunks = tracer.spec().inputChunks;
  switch (member.property) {
  case Property::Rank: return Value(int64_t(self->rank));
  case Property::Index: return Value(int64_t(self->index));
  case Property::Size: return Value(int64_t(self->size));
  case Property::OriginRank:
  case Property::OriginIndex: {
    std::optional<ContribId> id = tracer.origin(*self, name, member.nameLoc);
    if (!id)
      return std::nullopt;
    return Value(int64_t(member.property == Property::OriginRank
                             ? *id / inputChunks
                             : *id % inputChunks));
  }
  case Property::DestRank:
  case Property::DestIndex: {
    std::optional<ContribId> id = tracer.origin(*self, name, member.nameLoc);
    std::optional<SlotRange> dest =
        id ? tracer.destination(*id, name, member.nameLoc) : std::nullopt;
    if (!dest)
      return std::nullopt;
    return Value(int64_t(
        member.property == Property::DestRank ? dest->rank : dest->index));
  }
  }
  return std::nullopt;
}

std::string Interp::describe(const SlotRange &range) const {
  return formatSlots(range, tracer.scratchNames());
}
