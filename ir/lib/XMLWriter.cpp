//===- XMLWriter.cpp - Writing MSCCL XML ----------------------------------===//
//
// Written by hand rather than through tinyxml2's printer so that the layout
// (attribute order, two-space indentation, self-closing steps) is fixed by
// this file alone: equal algorithms must give byte-identical files.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/XML.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

namespace coll::ir {
namespace {

/// Escapes an attribute value. Whitespace other than a plain space is written
/// as a character reference because XML readers normalise it in attributes.
void writeEscaped(llvm::raw_ostream &os, llvm::StringRef value) { os << xmlEscaped(value); }

/// Writes `head` once per run of `items` whose text stays short: MSCCL's
/// parser reads an attribute value into a 255-byte buffer, and skips the
/// condition only if it can read it.
void writeLists(llvm::raw_ostream &os, const std::string &head,
                const std::vector<std::string> &items) {
  constexpr size_t MaxValue = 200;
  for (size_t i = 0; i < items.size();) {
    std::string value = items[i++];
    while (i < items.size() && value.size() + 1 + items[i].size() <= MaxValue)
      value += " " + items[i++];
    os << head << value << "\"/>\n";
  }
}

/// A custom collective's `<condition>` (docs/IR.md, "Custom collectives").
void writeCondition(llvm::raw_ostream &os, const Definition &def) {
  os << "  <condition i_chunks=\"" << def.inputChunks << "\" o_chunks=\""
     << def.outputChunks << "\">\n";
  for (int32_t r = 0; r < def.nranks; ++r) {
    std::vector<std::string> chunks;
    for (int32_t j = 0; j < def.inputChunks; ++j)
      if (def.inputDefined[r][j])
        chunks.push_back(std::to_string(j));
    writeLists(os, "    <pre rank=\"" + std::to_string(r) + "\" chunks=\"",
               chunks);
  }
  for (int32_t r = 0; r < def.nranks; ++r)
    for (int32_t i = 0; i < def.outputChunks; ++i) {
      std::vector<std::string> holds;
      for (uint32_t id : def.expected[r][i])
        holds.push_back(std::to_string(id / uint32_t(def.inputChunks)) + ":" +
                        std::to_string(id % uint32_t(def.inputChunks)));
      writeLists(os,
                 "    <post rank=\"" + std::to_string(r) + "\" chunk=\"" +
                     std::to_string(i) + "\" holds=\"",
                 holds);
    }
  os << "  </condition>\n";
}

/// Appends `v` in decimal.
char *appendInt(char *at, int64_t v) {
  char digits[24];
  int n = 0;
  uint64_t u = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  do {
    digits[n++] = char('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    *at++ = '-';
  while (n)
    *at++ = digits[--n];
  return at;
}

char *appendText(char *at, llvm::StringRef text) {
  std::memcpy(at, text.data(), text.size());
  return at + text.size();
}

/// One `<step>` line, formatted in place: files of millions of steps are
/// written at the speed of memory, not of one stream call per field.
void writeStep(llvm::raw_ostream &os, int64_t index, const Step &step) {
  char line[256];
  char *at = appendText(line, "      <step s=\"");
  at = appendInt(at, index);
  at = appendText(at, "\" type=\"");
  at = appendText(at, stepTypeName(step.type));
  at = appendText(at, "\" srcbuf=\"");
  at = appendText(at, bufferName(step.srcBuf));
  at = appendText(at, "\" srcoff=\"");
  at = appendInt(at, step.srcOff);
  at = appendText(at, "\" dstbuf=\"");
  at = appendText(at, bufferName(step.dstBuf));
  at = appendText(at, "\" dstoff=\"");
  at = appendInt(at, step.dstOff);
  at = appendText(at, "\" cnt=\"");
  at = appendInt(at, step.count);
  at = appendText(at, "\" depid=\"");
  at = appendInt(at, step.depTb);
  at = appendText(at, "\" deps=\"");
  at = appendInt(at, step.depStep);
  at = appendText(at, "\" hasdep=\"");
  at = appendInt(at, int(step.hasDep));
  // Only direct steps name a peer: MSCCL files are written as they were.
  if (step.peer != -1 || stepTypeInfo(step.type).hasPeer()) {
    at = appendText(at, "\" peer=\"");
    at = appendInt(at, step.peer);
  }
  at = appendText(at, "\"/>\n");
  os.write(line, size_t(at - line));
}

void writeTo(llvm::raw_ostream &os, const Algorithm &alg) {
  os << "<algo name=\"";
  writeEscaped(os, alg.name);
  os << "\" proto=\"" << protocolName(alg.protocol) << "\" nchannels=\""
     << alg.nchannels << "\" nchunksperloop=\"" << alg.nchunksPerLoop
     << "\" ngpus=\"" << alg.ngpus() << "\" coll=\"";
  writeEscaped(os, collectiveAttribute(alg));
  os << "\" inplace=\"" << int(alg.inplace) << "\" outofplace=\""
     << int(alg.outofplace) << "\" minBytes=\"" << alg.minBytes
     << "\" maxBytes=\"" << alg.maxBytes << '"';
  if (collectiveInfo(alg.collective).hasRoot)
    os << " root=\"" << alg.root << '"';
  os << ">\n";

  for (size_t g = 0; g < alg.gpus.size(); ++g) {
    const Gpu &gpu = alg.gpus[g];
    os << "  <gpu id=\"" << g << "\" i_chunks=\"" << gpu.inputChunks
       << "\" o_chunks=\"" << gpu.outputChunks << "\" s_chunks=\""
       << gpu.scratchChunks << "\">\n";
    for (size_t t = 0; t < gpu.tbs.size(); ++t) {
      const ThreadBlock &tb = gpu.tbs[t];
      os << "    <tb id=\"" << t << "\" send=\"" << tb.sendPeer << "\" recv=\""
         << tb.recvPeer << "\" chan=\"" << tb.channel << "\">\n";
      for (size_t s = 0; s < tb.steps.size(); ++s)
        writeStep(os, int64_t(s), tb.steps[s]);
      os << "    </tb>\n";
    }
    os << "  </gpu>\n";
  }
  if (alg.condition && alg.collective == Collective::Custom)
    writeCondition(os, *alg.condition);
  os << "</algo>\n";
}

} // namespace

std::string xmlEscaped(llvm::StringRef value, bool attribute) {
  std::string out;
  llvm::raw_string_ostream os(out);
  for (char c : value) {
    if (!attribute && c != '&' && c != '<' && c != '>') {
      os << c;
      continue;
    }
    switch (c) {
    case '&':
      os << "&amp;";
      break;
    case '<':
      os << "&lt;";
      break;
    case '>':
      os << "&gt;";
      break;
    case '"':
      os << "&quot;";
      break;
    case '\'':
      os << "&apos;";
      break;
    case '\n':
      os << "&#10;";
      break;
    case '\r':
      os << "&#13;";
      break;
    case '\t':
      os << "&#9;";
      break;
    default:
      os << c;
      break;
    }
  }
  os.flush();
  return out;
}

std::string writeAlgorithm(const Algorithm &alg) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os.SetBufferSize(1 << 16); // the stream is unbuffered by default
  writeTo(os, alg);
  os.flush(); // str() does not flush
  return text;
}

void writeAlgorithm(const Algorithm &alg, llvm::raw_ostream &os) { writeTo(os, alg); }

llvm::Error writeAlgorithmFile(const Algorithm &alg, llvm::StringRef path) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(ec, "cannot write '" + path +
                                           "': " + ec.message());
  writeTo(os, alg);
  os.flush(); // not close(): "-" is stdout, which stays open
  if (os.has_error()) {
    ec = os.error();
    os.clear_error();
    return llvm::createStringError(ec, "cannot write '" + path +
                                           "': " + ec.message());
  }
  return llvm::Error::success();
}

} // namespace coll::ir
