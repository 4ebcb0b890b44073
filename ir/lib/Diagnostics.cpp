//===- Diagnostics.cpp - Located diagnostics for IR files -----------------===//
//
// The one place that decides how an IR diagnostic looks, so that reader,
// verifier and tools agree and golden tests can pin the text.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Diagnostics.h"

namespace coll::ir {

void DiagnosticList::error(uint32_t line, StepRef where,
                           const llvm::Twine &message) {
  diags.push_back({Severity::Error, line, where, message.str()});
  ++numErrors;
}

void DiagnosticList::warning(uint32_t line, StepRef where,
                             const llvm::Twine &message) {
  diags.push_back({Severity::Warning, line, where, message.str()});
}

std::string DiagnosticList::format(const Diagnostic &diag) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << fileName;
  if (diag.line != 0)
    os << ':' << diag.line;
  os << (diag.severity == Severity::Error ? ": error: " : ": warning: ");
  // The element prefix: "gpu 0 tb 1 step 3: ", leaving out unknown parts; an
  // <algo>-level diagnostic has none.
  const char *sep = "";
  auto part = [&](const char *kind, int32_t id) {
    if (id < 0)
      return;
    os << sep << kind << ' ' << id;
    sep = " ";
  };
  part("gpu", diag.where.gpu);
  part("tb", diag.where.tb);
  part("step", diag.where.step);
  if (*sep)
    os << ": ";
  os << diag.message;
  return os.str();
}

void DiagnosticList::print(llvm::raw_ostream &os, Severity severity,
                           size_t limit) const {
  size_t total = 0;
  for (const Diagnostic &diag : diags) {
    if (diag.severity != severity)
      continue;
    if (total < limit)
      os << format(diag) << '\n';
    ++total;
  }
  if (total > limit) {
    size_t more = total - limit;
    os << "... and " << more << " more "
       << (severity == Severity::Error ? "error" : "warning")
       << (more == 1 ? "" : "s") << '\n';
  }
}

llvm::Error DiagnosticList::takeErrors() const {
  if (numErrors == 0)
    return llvm::Error::success();
  std::string text;
  for (const Diagnostic &diag : diags) {
    if (diag.severity != Severity::Error)
      continue;
    if (!text.empty())
      text += '\n';
    text += format(diag);
  }
  return llvm::make_error<llvm::StringError>(std::move(text),
                                             llvm::inconvertibleErrorCode());
}

} // namespace coll::ir
