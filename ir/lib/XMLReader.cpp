//===- XMLReader.cpp - Reading MSCCL XML ----------------------------------===//
//
// One pass over the tinyxml2 tree that records every problem instead of
// stopping at the first, so that one run of `collir` shows all of them.
//
// The input may be hostile (the reader is fuzzed): nothing is allocated or
// indexed by a number read from the file. Elements are first collected in
// file order with the id they claim, and only ids that were checked against
// the number of elements actually present are used to place them.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/XML.h"

#include "coll/ir/Mscclpp.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <tinyxml2.h>

#include <algorithm>
#include <limits>
#include <type_traits>

namespace coll::ir {
namespace {

using tinyxml2::XMLElement;
using tinyxml2::XMLNode;

/// The attributes each element kind knows; any other is warned about.
constexpr llvm::StringLiteral AlgoAttrs[] = {
    "name",    "proto",      "nchannels", "nchunksperloop", "ngpus", "coll",
    "inplace", "outofplace", "minBytes",  "maxBytes",       "root"};
constexpr llvm::StringLiteral GpuAttrs[] = {"id", "i_chunks", "o_chunks",
                                            "s_chunks"};
constexpr llvm::StringLiteral TbAttrs[] = {"id", "send", "recv", "chan"};
constexpr llvm::StringLiteral StepAttrs[] = {
    "s",      "type", "srcbuf", "srcoff", "dstbuf",
    "dstoff", "cnt",  "depid",  "deps",   "hasdep", "peer"};
constexpr llvm::StringLiteral ConditionAttrs[] = {"i_chunks", "o_chunks"};
constexpr llvm::StringLiteral PreAttrs[] = {"rank", "chunks"};
constexpr llvm::StringLiteral PostAttrs[] = {"rank", "chunk", "holds"};

/// The children each element kind knows.
const llvm::StringRef AlgoChildren[] = {"gpu", "condition"};
const llvm::StringRef ConditionChildren[] = {"pre", "post"};

/// A condition's chunk cells over all ranks (ranks times chunks, for input
/// and for output) are bounded, so that a hostile header cannot make the
/// reader allocate without bound.
constexpr int64_t MaxConditionCells = int64_t(1) << 24;

/// How the id of each element kind is named in messages.
struct IdKind {
  const char *singular, *plural;
};
constexpr IdKind GpuIds{"gpu id", "gpu ids"};
constexpr IdKind TbIds{"tb id", "tb ids"};
constexpr IdKind StepIds{"step number", "step numbers"};

uint32_t lineOf(const XMLNode &node) {
  return static_cast<uint32_t>(std::max(node.GetLineNum(), 0));
}

/// An attribute value for a message: escaped and cut short, so that a hostile
/// file cannot make a diagnostic span lines or megabytes.
std::string quoted(llvm::StringRef value) {
  constexpr size_t MaxShown = 32;
  std::string text = "\"";
  llvm::raw_string_ostream os(text);
  llvm::printEscapedString(value.take_front(MaxShown), os);
  os << (value.size() > MaxShown ? "...\"" : "\"");
  return os.str();
}

/// An element as read, with the id it claims (none when the id attribute was
/// missing or malformed, which has been reported).
template <typename T> struct WithId {
  std::optional<int32_t> id;
  uint32_t line = 0;
  T value;
};

/// The known attributes of one element and where to report problems with
/// them.
struct Attributes {
  llvm::StringRef tag;
  uint32_t line = 0;
  StepRef where;
  llvm::ArrayRef<llvm::StringLiteral> names;
  llvm::SmallVector<const char *, 12> values; ///< parallel to names

  const char *get(llvm::StringRef name) const {
    const auto *it = llvm::find(names, name);
    assert(it != names.end() && "attribute not in the element's table");
    return values[static_cast<size_t>(it - names.begin())];
  }
};

class Reader {
public:
  explicit Reader(DiagnosticList &diags) : diags(diags) {}

  llvm::Expected<Algorithm> read(llvm::StringRef text);

private:
  Algorithm readAlgo(const XMLElement &elem);
  WithId<Gpu> readGpu(const XMLElement &elem);
  WithId<ThreadBlock> readTb(const XMLElement &elem, int32_t gpu);
  WithId<Step> readStep(const XMLElement &elem, int32_t gpu, int32_t tb);
  std::optional<Definition> readCondition(const XMLElement &elem,
                                          const Algorithm &alg);
  bool readRank(const Attributes &attrs, int32_t nranks, int32_t &rank);
  /// Splits a list attribute into its space-separated tokens.
  std::optional<llvm::SmallVector<llvm::StringRef, 16>>
  tokens(const Attributes &attrs, llvm::StringRef name);

  Attributes attributes(const XMLElement &elem,
                        llvm::ArrayRef<llvm::StringLiteral> names,
                        StepRef where);
  std::vector<const XMLElement *> children(const XMLElement &parent,
                                           llvm::StringRef tag);
  std::vector<const XMLElement *>
  children(const XMLElement &parent, llvm::ArrayRef<llvm::StringRef> tags);
  template <typename T>
  std::vector<T> place(std::vector<WithId<T>> items, const IdKind &kind,
                       uint32_t parentLine, StepRef parentWhere);

  const char *text(const Attributes &attrs, llvm::StringRef name,
                   bool required);
  template <typename Int>
  bool integer(const Attributes &attrs, llvm::StringRef name, Int &out,
               bool required = true);
  bool boolean(const Attributes &attrs, llvm::StringRef name, bool &out,
               bool required = true);
  template <typename Enum>
  void enumerated(const Attributes &attrs, llvm::StringRef name,
                  std::optional<Enum> (*parse)(llvm::StringRef), Enum &out,
                  const char *what);

  /// Warns once per distinct message, with the number of occurrences: real
  /// files repeat the same unknown attribute on every step.
  void warnOnce(uint32_t line, const std::string &message);
  void flushWarnings();

  DiagnosticList &diags;
  struct Repeated {
    std::string message;
    uint32_t firstLine;
    unsigned count;
  };
  std::vector<Repeated> repeated;
  llvm::StringMap<size_t> repeatedIndex;
};

llvm::Expected<Algorithm> Reader::read(llvm::StringRef input) {
  unsigned errorsBefore = diags.errorCount();
  tinyxml2::XMLDocument doc;
  if (doc.Parse(input.data(), input.size()) != tinyxml2::XML_SUCCESS) {
    diags.error(static_cast<uint32_t>(std::max(doc.ErrorLineNum(), 0)), {},
                llvm::Twine("malformed XML (tinyxml2: ") + doc.ErrorName() +
                    ")");
    return diags.takeErrors();
  }

  const XMLElement *algo = nullptr;
  for (const XMLNode *node = doc.FirstChild(); node;
       node = node->NextSibling()) {
    const XMLElement *elem = node->ToElement();
    if (!elem)
      continue; // declarations, comments, DOCTYPE
    if (llvm::StringRef(elem->Name()) != "algo")
      diags.error(lineOf(*elem), {},
                  llvm::Twine("unexpected top-level element <") + elem->Name() +
                      ">: the file must hold one <algo>");
    else if (algo)
      diags.error(lineOf(*elem), {},
                  "second <algo> element (the first is at line " +
                      llvm::Twine(lineOf(*algo)) + ")");
    else
      algo = elem;
  }
  if (!algo)
    diags.error(0, {}, "no <algo> element");

  Algorithm alg;
  if (algo)
    alg = readAlgo(*algo);
  flushWarnings();
  if (diags.errorCount() != errorsBefore)
    return diags.takeErrors();
  return alg;
}

Algorithm Reader::readAlgo(const XMLElement &elem) {
  Algorithm alg;
  alg.line = lineOf(elem);
  Attributes attrs = attributes(elem, AlgoAttrs, {});
  if (const char *name = attrs.get("name"))
    alg.name = name;
  enumerated(attrs, "proto", parseProtocol, alg.protocol, "protocol");
  integer(attrs, "nchannels", alg.nchannels);
  integer(attrs, "nchunksperloop", alg.nchunksPerLoop);
  int32_t ngpus = 0;
  bool haveNgpus = integer(attrs, "ngpus", ngpus);
  if (const char *coll = text(attrs, "coll", /*required=*/true)) {
    if (std::optional<Collective> known = parseCollective(coll)) {
      alg.collective = *known;
      alg.collectiveSpelling = collectiveName(*known).str();
    } else {
      diags.warning(alg.line, {},
                    "unknown collective " + quoted(coll) + " read as custom");
      alg.collective = Collective::Custom;
      alg.collectiveSpelling = coll;
    }
  }
  // The older header form has no `outofplace`: then it is the opposite of
  // `inplace`.
  if (boolean(attrs, "inplace", alg.inplace))
    alg.outofplace = !alg.inplace;
  boolean(attrs, "outofplace", alg.outofplace, /*required=*/false);
  integer(attrs, "minBytes", alg.minBytes, /*required=*/false);
  integer(attrs, "maxBytes", alg.maxBytes, /*required=*/false);

  int32_t root = -1;
  bool haveRoot = integer(attrs, "root", root, /*required=*/false);
  if (collectiveInfo(alg.collective).hasRoot) {
    alg.root = haveRoot ? root : 0;
  } else if (haveRoot && root != -1) {
    diags.warning(alg.line, {},
                  "attribute 'root' ignored: " + alg.collectiveSpelling +
                      " has no root");
  }

  std::vector<WithId<Gpu>> gpus;
  const XMLElement *condition = nullptr;
  for (const XMLElement *child : children(elem, AlgoChildren)) {
    if (llvm::StringRef(child->Name()) == "gpu")
      gpus.push_back(readGpu(*child));
    else if (condition)
      diags.error(lineOf(*child), {},
                  "second <condition> element (the first is at line " +
                      llvm::Twine(lineOf(*condition)) + ")");
    else
      condition = child;
  }
  alg.gpus = place(std::move(gpus), GpuIds, alg.line, {});
  if (haveNgpus && ngpus != alg.ngpus())
    diags.error(alg.line, {},
                "ngpus " + llvm::Twine(ngpus) +
                    " does not match the number of <gpu> elements, " +
                    llvm::Twine(alg.ngpus()));
  if (condition && alg.collective != Collective::Custom) {
    diags.warning(lineOf(*condition), {},
                  "<condition> ignored: " + alg.collectiveSpelling +
                      " has a built-in definition");
  } else if (condition) {
    alg.conditionLine = lineOf(*condition);
    alg.condition = readCondition(*condition, alg);
  }
  return alg;
}

/// `<condition i_chunks o_chunks>` with `<pre rank chunks="j ...">` for the
/// input chunks defined at the start and `<post rank chunk holds="a:j ...">`
/// for what each constrained output chunk must hold (docs/IR.md). Several
/// elements for one rank, or one output chunk, add up.
std::optional<Definition> Reader::readCondition(const XMLElement &elem,
                                                const Algorithm &alg) {
  unsigned errorsBefore = diags.errorCount();
  Attributes attrs = attributes(elem, ConditionAttrs, {});
  Definition def;
  def.nranks = alg.ngpus();
  bool sized = integer(attrs, "i_chunks", def.inputChunks) &
               integer(attrs, "o_chunks", def.outputChunks);
  for (const char *name : {"i_chunks", "o_chunks"}) {
    int32_t chunks = llvm::StringRef(name) == "i_chunks" ? def.inputChunks
                                                         : def.outputChunks;
    if (sized && chunks < 0) {
      diags.error(attrs.line, {},
                  "attribute '" + llvm::Twine(name) +
                      "' of <condition> is negative: " + llvm::Twine(chunks));
      sized = false;
    } else if (sized && int64_t(chunks) * std::max(def.nranks, 1) >
                            MaxConditionCells) {
      diags.error(attrs.line, {},
                  "attribute '" + llvm::Twine(name) + "' of <condition>: " +
                      llvm::Twine(chunks) + " chunks on each of " +
                      llvm::Twine(def.nranks) + " ranks is more than the " +
                      llvm::Twine(MaxConditionCells) + " a condition may name");
      sized = false;
    }
  }
  std::vector<const XMLElement *> parts = children(elem, ConditionChildren);
  if (!sized)
    return std::nullopt;
  def.inputDefined.assign(def.nranks,
                          std::vector<bool>(size_t(def.inputChunks), false));
  def.expected.assign(def.nranks, std::vector<std::vector<uint32_t>>(
                                      size_t(def.outputChunks)));
  auto index = [&](const Attributes &attrs, llvm::StringRef name,
                   llvm::StringRef token, int32_t limit,
                   const char *what) -> std::optional<int32_t> {
    int32_t value;
    if (token.getAsInteger(10, value) || !llvm::all_of(token, llvm::isDigit) ||
        value >= limit) {
      diags.error(attrs.line, {},
                  "attribute '" + name + "' of <" + attrs.tag + ">: " +
                      quoted(token) + " is not " + what + " in [0, " +
                      llvm::Twine(limit) + ")");
      return std::nullopt;
    }
    return value;
  };
  // Preconditions first, so that a postcondition can be checked against
  // them whatever the order of the elements.
  std::vector<std::pair<const XMLElement *, Attributes>> posts;
  for (const XMLElement *part : parts) {
    bool pre = llvm::StringRef(part->Name()) == "pre";
    Attributes partAttrs =
        attributes(*part, pre ? llvm::ArrayRef(PreAttrs) : PostAttrs, {});
    children(*part, ""); // no content; warn about any
    if (!pre) {
      posts.emplace_back(part, std::move(partAttrs));
      continue;
    }
    int32_t rank;
    auto list = tokens(partAttrs, "chunks");
    if (!readRank(partAttrs, def.nranks, rank) || !list)
      continue;
    for (llvm::StringRef token : *list)
      if (auto j = index(partAttrs, "chunks", token, def.inputChunks,
                         "an input chunk"))
        def.inputDefined[rank][*j] = true;
  }
  for (auto &[part, partAttrs] : posts) {
    int32_t rank, chunk = -1;
    auto list = tokens(partAttrs, "holds");
    bool ok = readRank(partAttrs, def.nranks, rank) &
              integer(partAttrs, "chunk", chunk);
    if (!ok || !list)
      continue;
    if (chunk < 0 || chunk >= def.outputChunks) {
      diags.error(partAttrs.line, {},
                  "attribute 'chunk' of <post>: " + llvm::Twine(chunk) +
                      " is not an output chunk in [0, " +
                      llvm::Twine(def.outputChunks) + ")");
      continue;
    }
    if (list->empty())
      diags.error(partAttrs.line, {},
                  "attribute 'holds' of <post> names no contribution (a "
                  "chunk no <post> names is unconstrained)");
    std::vector<uint32_t> &want = def.expected[rank][chunk];
    for (llvm::StringRef token : *list) {
      auto [from, at] = token.split(':');
      auto a = index(partAttrs, "holds", from, def.nranks, "a rank");
      auto j = a ? index(partAttrs, "holds", at, def.inputChunks,
                         "an input chunk")
                 : std::nullopt;
      if (!a || !j)
        continue;
      std::string name = "in(" + std::to_string(*a) + "," +
                         std::to_string(*j) + ")";
      uint32_t id = uint32_t(*a) * uint32_t(def.inputChunks) + uint32_t(*j);
      auto it = std::lower_bound(want.begin(), want.end(), id);
      if (!def.inputDefined[*a][*j])
        diags.error(partAttrs.line, {},
                    "<post> for rank " + llvm::Twine(rank) + " chunk " +
                        llvm::Twine(chunk) + " names " + name +
                        ", which no <pre> provides");
      else if (it != want.end() && *it == id)
        diags.error(partAttrs.line, {},
                    "<post> for rank " + llvm::Twine(rank) + " chunk " +
                        llvm::Twine(chunk) + " names " + name + " twice");
      else
        want.insert(it, id);
    }
  }
  if (diags.errorCount() != errorsBefore)
    return std::nullopt;
  return def;
}

bool Reader::readRank(const Attributes &attrs, int32_t nranks, int32_t &rank) {
  if (!integer(attrs, "rank", rank))
    return false;
  if (rank >= 0 && rank < nranks)
    return true;
  diags.error(attrs.line, {},
              "attribute 'rank' of <" + attrs.tag + ">: " + llvm::Twine(rank) +
                  " is out of range [0, " + llvm::Twine(nranks) + ")");
  return false;
}

std::optional<llvm::SmallVector<llvm::StringRef, 16>>
Reader::tokens(const Attributes &attrs, llvm::StringRef name) {
  const char *value = text(attrs, name, /*required=*/true);
  if (!value)
    return std::nullopt;
  llvm::SmallVector<llvm::StringRef, 16> list;
  llvm::SplitString(value, list, " ");
  return list;
}

WithId<Gpu> Reader::readGpu(const XMLElement &elem) {
  WithId<Gpu> result;
  result.line = result.value.line = lineOf(elem);
  Gpu &gpu = result.value;
  Attributes attrs = attributes(elem, GpuAttrs, {});
  int32_t id = -1;
  if (integer(attrs, "id", id))
    result.id = attrs.where.gpu = id;
  integer(attrs, "i_chunks", gpu.inputChunks);
  integer(attrs, "o_chunks", gpu.outputChunks);
  integer(attrs, "s_chunks", gpu.scratchChunks);

  std::vector<WithId<ThreadBlock>> tbs;
  for (const XMLElement *child : children(elem, "tb"))
    tbs.push_back(readTb(*child, attrs.where.gpu));
  gpu.tbs = place(std::move(tbs), TbIds, gpu.line, attrs.where);
  return result;
}

WithId<ThreadBlock> Reader::readTb(const XMLElement &elem, int32_t gpu) {
  WithId<ThreadBlock> result;
  result.line = result.value.line = lineOf(elem);
  ThreadBlock &tb = result.value;
  Attributes attrs = attributes(elem, TbAttrs, {gpu, -1, -1});
  int32_t id = -1;
  if (integer(attrs, "id", id))
    result.id = attrs.where.tb = id;
  integer(attrs, "send", tb.sendPeer);
  integer(attrs, "recv", tb.recvPeer);
  integer(attrs, "chan", tb.channel);

  std::vector<WithId<Step>> steps;
  for (const XMLElement *child : children(elem, "step"))
    steps.push_back(readStep(*child, gpu, attrs.where.tb));
  tb.steps = place(std::move(steps), StepIds, tb.line, attrs.where);
  return result;
}

WithId<Step> Reader::readStep(const XMLElement &elem, int32_t gpu, int32_t tb) {
  WithId<Step> result;
  result.line = result.value.line = lineOf(elem);
  Step &step = result.value;
  Attributes attrs = attributes(elem, StepAttrs, {gpu, tb, -1});
  int32_t id = -1;
  if (integer(attrs, "s", id))
    result.id = attrs.where.step = id;
  enumerated(attrs, "type", parseStepType, step.type, "step type");
  enumerated(attrs, "srcbuf", parseBuffer, step.srcBuf, "buffer");
  integer(attrs, "srcoff", step.srcOff);
  enumerated(attrs, "dstbuf", parseBuffer, step.dstBuf, "buffer");
  integer(attrs, "dstoff", step.dstOff);
  integer(attrs, "cnt", step.count);
  integer(attrs, "depid", step.depTb);
  integer(attrs, "deps", step.depStep);
  boolean(attrs, "hasdep", step.hasDep);
  // Direct steps only (docs/IR.md, "Direct steps"); the verifier checks it.
  integer(attrs, "peer", step.peer, /*required=*/false);
  children(elem, ""); // a step has no content; warn about any
  return result;
}

Attributes Reader::attributes(const XMLElement &elem,
                              llvm::ArrayRef<llvm::StringLiteral> names,
                              StepRef where) {
  Attributes attrs;
  attrs.tag = elem.Name();
  attrs.line = lineOf(elem);
  attrs.where = where;
  attrs.names = names;
  attrs.values.assign(names.size(), nullptr);
  // tinyxml2 rejects an attribute given twice, so each slot is set at most
  // once.
  for (const tinyxml2::XMLAttribute *attr = elem.FirstAttribute(); attr;
       attr = attr->Next()) {
    const auto *it = llvm::find(names, llvm::StringRef(attr->Name()));
    if (it == names.end())
      warnOnce(attrs.line, "unknown attribute '" + std::string(attr->Name()) +
                               "' on <" + attrs.tag.str() + "> ignored");
    else
      attrs.values[static_cast<size_t>(it - names.begin())] = attr->Value();
  }
  return attrs;
}

std::vector<const XMLElement *> Reader::children(const XMLElement &parent,
                                                 llvm::StringRef tag) {
  return children(parent, tag.empty() ? llvm::ArrayRef<llvm::StringRef>()
                                      : llvm::ArrayRef(tag));
}

std::vector<const XMLElement *>
Reader::children(const XMLElement &parent,
                 llvm::ArrayRef<llvm::StringRef> tags) {
  std::vector<const XMLElement *> result;
  for (const XMLNode *node = parent.FirstChild(); node;
       node = node->NextSibling()) {
    if (const XMLElement *elem = node->ToElement()) {
      if (llvm::is_contained(tags, llvm::StringRef(elem->Name())))
        result.push_back(elem);
      else
        warnOnce(lineOf(*elem), "unknown element <" +
                                    std::string(elem->Name()) + "> in <" +
                                    parent.Name() + "> ignored");
    } else if (node->ToText()) {
      warnOnce(lineOf(*node),
               "text in <" + std::string(parent.Name()) + "> ignored");
    }
  }
  return result;
}

template <typename T>
std::vector<T> Reader::place(std::vector<WithId<T>> items, const IdKind &kind,
                             uint32_t parentLine, StepRef parentWhere) {
  size_t count = items.size();
  std::vector<T> placed(count);
  std::vector<size_t> owner(count, SIZE_MAX); // item that took each id
  bool allClaimed = true;
  for (size_t i = 0; i < count; ++i) {
    WithId<T> &item = items[i];
    if (!item.id) {
      allClaimed = false;
      continue;
    }
    int64_t id = *item.id;
    if (id < 0 || static_cast<uint64_t>(id) >= count) {
      diags.error(item.line, parentWhere,
                  llvm::Twine(kind.singular) + " " + llvm::Twine(id) +
                      " is out of range [0, " + llvm::Twine(count) + ")");
      continue;
    }
    size_t slot = static_cast<size_t>(id);
    if (owner[slot] != SIZE_MAX) {
      diags.error(item.line, parentWhere,
                  "duplicate " + llvm::Twine(kind.singular) + " " +
                      llvm::Twine(id) + " (also at line " +
                      llvm::Twine(items[owner[slot]].line) + ")");
      continue;
    }
    owner[slot] = i;
    placed[slot] = std::move(item.value);
  }
  // An element whose id could not be read is most likely the missing one;
  // saying so again would only add noise.
  if (!allClaimed)
    return placed;
  llvm::SmallVector<size_t, 8> missing;
  size_t numMissing = 0;
  for (size_t slot = 0; slot < count; ++slot) {
    if (owner[slot] != SIZE_MAX)
      continue;
    if (missing.size() < 8)
      missing.push_back(slot);
    ++numMissing;
  }
  if (numMissing == 0)
    return placed;
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i) {
    if (i != 0)
      list += i + 1 == missing.size() && numMissing == missing.size() ? " and "
                                                                      : ", ";
    list += std::to_string(missing[i]);
  }
  if (numMissing > missing.size())
    list += " and " + std::to_string(numMissing - missing.size()) + " more";
  diags.error(parentLine, parentWhere,
              llvm::Twine(kind.plural) + " are not dense: " + list +
                  (numMissing == 1 ? " is" : " are") + " missing");
  return placed;
}

const char *Reader::text(const Attributes &attrs, llvm::StringRef name,
                         bool required) {
  const char *value = attrs.get(name);
  if (!value && required)
    diags.error(attrs.line, attrs.where,
                "<" + attrs.tag + "> is missing attribute '" + name + "'");
  return value;
}

template <typename Int>
bool Reader::integer(const Attributes &attrs, llvm::StringRef name, Int &out,
                     bool required) {
  const char *value = text(attrs, name, required);
  if (!value)
    return false;
  auto complain = [&](const llvm::Twine &problem) {
    diags.error(attrs.line, attrs.where,
                "attribute '" + name + "' of <" + attrs.tag + "> " + problem);
    return false;
  };
  // Strictly an optional '-' and decimal digits: no spaces, '+', exponents
  // or trailing text, which permissive parsers would silently accept.
  llvm::StringRef digits(value);
  bool negative = digits.consume_front("-");
  if (digits.empty() || !llvm::all_of(digits, llvm::isDigit))
    return complain("is not an integer: " + quoted(value));
  using Limits = std::numeric_limits<Int>;
  uint64_t magnitude = 0;
  bool overflow = false;
  for (char c : digits) {
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (magnitude > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      overflow = true;
      break;
    }
    magnitude = magnitude * 10 + digit;
  }
  uint64_t maxNegative =
      std::is_signed_v<Int> ? uint64_t(-int64_t(Limits::min())) : 0;
  if (overflow || (negative ? magnitude > maxNegative
                            : magnitude > uint64_t(Limits::max())))
    return complain("is out of range: " + quoted(value) + " is not in [" +
                    llvm::Twine(int64_t(Limits::min())) + ", " +
                    llvm::Twine(uint64_t(Limits::max())) + "]");
  out = negative ? Int(-int64_t(magnitude)) : Int(magnitude);
  return true;
}

bool Reader::boolean(const Attributes &attrs, llvm::StringRef name, bool &out,
                     bool required) {
  const char *value = text(attrs, name, required);
  if (!value)
    return false;
  llvm::StringRef flag(value);
  if (flag != "0" && flag != "1") {
    diags.error(attrs.line, attrs.where,
                "attribute '" + name + "' of <" + attrs.tag +
                    "> must be \"0\" or \"1\", not " + quoted(flag));
    return false;
  }
  out = flag == "1";
  return true;
}

template <typename Enum>
void Reader::enumerated(const Attributes &attrs, llvm::StringRef name,
                        std::optional<Enum> (*parse)(llvm::StringRef),
                        Enum &out, const char *what) {
  const char *value = text(attrs, name, /*required=*/true);
  if (!value)
    return;
  if (std::optional<Enum> parsed = parse(value))
    out = *parsed;
  else
    diags.error(attrs.line, attrs.where,
                llvm::Twine("unknown ") + what + " " + quoted(value) +
                    " in attribute '" + name + "' of <" + attrs.tag + ">");
}

void Reader::warnOnce(uint32_t line, const std::string &message) {
  auto [it, inserted] = repeatedIndex.try_emplace(message, repeated.size());
  if (inserted)
    repeated.push_back({message, line, 1});
  else
    ++repeated[it->second].count;
}

void Reader::flushWarnings() {
  for (const Repeated &warning : repeated) {
    std::string message = warning.message;
    if (warning.count > 1)
      message += " (" + std::to_string(warning.count) + " occurrences)";
    diags.warning(warning.firstLine, {}, message);
  }
  repeated.clear();
  repeatedIndex.clear();
}

} // namespace

llvm::Expected<Algorithm> parseAlgorithm(llvm::StringRef text,
                                         DiagnosticList &diags) {
  return Reader(diags).read(text);
}

llvm::Expected<Algorithm> readAlgorithmFile(llvm::StringRef path,
                                            DiagnosticList &diags) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(),
                                   "cannot read '" + path +
                                       "': " + buffer.getError().message());
  // An MSCCL++ execution plan is a JSON object; MSCCL XML starts with '<'.
  if (mscclpp::looksLikePlan((*buffer)->getBuffer()))
    return mscclpp::parsePlanAlgorithm((*buffer)->getBuffer(), diags);
  return parseAlgorithm((*buffer)->getBuffer(), diags);
}

} // namespace coll::ir
