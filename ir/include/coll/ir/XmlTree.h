//===- XmlTree.h - XML documents other than IR files ------------*- C++ -*-===//
//
// The IR library is the one place that parses XML (with tinyxml2); other
// libraries that read an XML format (NCCL's topology files, in synthesis)
// get the document as this plain tree of elements, with their lines.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_XMLTREE_H
#define COLL_IR_XMLTREE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace coll::ir {

/// An element: its name, attributes in document order and child elements
/// (text and comments are dropped).
struct XmlElement {
  std::string name;
  int line = 0;
  std::vector<std::pair<std::string, std::string>> attributes;
  std::vector<XmlElement> children;

  /// The attribute's value, or null when it is absent.
  const char *attribute(llvm::StringRef key) const;
  /// The attribute as an integer read as tinyxml2 reads one (decimal, or
  /// hexadecimal after 0x); false when it is absent or not a number.
  bool intAttribute(llvm::StringRef key, int &out) const;
  /// The first child element called `childName`, or null.
  const XmlElement *child(llvm::StringRef childName) const;
};

/// The root element of the XML document `text`. A malformed document is
/// the error "FILE:LINE: error: malformed XML: WHAT"; one without any
/// element "FILE:1: error: no XML element".
llvm::Expected<XmlElement> parseXmlTree(llvm::StringRef text, llvm::StringRef fileName);

} // namespace coll::ir

#endif // COLL_IR_XMLTREE_H
