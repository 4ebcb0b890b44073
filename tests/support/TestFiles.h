//===- TestFiles.h - Listing test input folders -----------------*- C++ -*-===//

#ifndef COLL_TESTS_SUPPORT_TESTFILES_H
#define COLL_TESTS_SUPPORT_TESTFILES_H

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace coll::testing {

/// The files of `dir` whose names end in `extension` (".xml"), sorted; empty
/// when the folder is absent, so that parameterised tests simply have no
/// instances there.
inline std::vector<std::string> filesWithExtension(llvm::StringRef dir,
                                                   llvm::StringRef extension) {
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == extension)
      files.push_back(it->path());
  std::sort(files.begin(), files.end());
  return files;
}

/// The shared MSCCL corpus (../shared/msccl-xml, or the folder named by the
/// environment variable COLL_MSCCL_XML_DIR: scripts/gpu-check.sh runs the
/// staged tests away from the source tree), sorted.
inline std::vector<std::string> corpusFiles() {
  const char *dir = std::getenv("COLL_MSCCL_XML_DIR");
  return filesWithExtension(dir && *dir ? dir : COLL_MSCCL_XML_DIR, ".xml");
}

/// A parameterised-test name for a file: its stem with every character that
/// is not a letter or digit replaced by '_'.
inline std::string testNameOfFile(llvm::StringRef path) {
  std::string name = llvm::sys::path::stem(path).str();
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !llvm::isAlnum(c); }, '_');
  return name;
}

} // namespace coll::testing

#endif // COLL_TESTS_SUPPORT_TESTFILES_H
