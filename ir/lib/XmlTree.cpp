//===- XmlTree.cpp - XML documents other than IR files --------------------===//

#include "coll/ir/XmlTree.h"

#include <cstdio>
#include <tinyxml2.h>

namespace coll::ir {

const char *XmlElement::attribute(llvm::StringRef key) const {
  for (const auto &[k, v] : attributes)
    if (k == key)
      return v.c_str();
  return nullptr;
}

bool XmlElement::intAttribute(llvm::StringRef key, int &out) const {
  const char *text = attribute(key);
  if (!text)
    return false;
  // tinyxml2's own reading (XMLUtil::ToInt), so that files read as before.
  const char *p = text;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    ++p;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    unsigned v = 0;
    if (std::sscanf(p, "%x", &v) != 1)
      return false;
    out = static_cast<int>(v);
    return true;
  }
  return std::sscanf(p, "%d", &out) == 1;
}

const XmlElement *XmlElement::child(llvm::StringRef childName) const {
  for (const XmlElement &c : children)
    if (c.name == childName)
      return &c;
  return nullptr;
}

llvm::Expected<XmlElement> parseXmlTree(llvm::StringRef text, llvm::StringRef fileName) {
  tinyxml2::XMLDocument doc;
  auto fail = [&](int line, const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fileName + ":" + llvm::Twine(line) + ": error: " + what);
  };
  if (doc.Parse(text.data(), text.size()) != tinyxml2::XML_SUCCESS)
    return fail(doc.ErrorLineNum(), llvm::Twine("malformed XML: ") + doc.ErrorStr());
  const tinyxml2::XMLElement *root = doc.FirstChildElement();
  if (!root)
    return fail(1, "no XML element");
  // Iteratively, element by element, so that deep documents do not recurse.
  XmlElement tree;
  std::vector<std::pair<const tinyxml2::XMLElement *, XmlElement *>> work{{root, &tree}};
  while (!work.empty()) {
    auto [from, to] = work.back();
    work.pop_back();
    to->name = from->Name();
    to->line = from->GetLineNum();
    for (const tinyxml2::XMLAttribute *a = from->FirstAttribute(); a; a = a->Next())
      to->attributes.emplace_back(a->Name(), a->Value());
    for (const tinyxml2::XMLElement *c = from->FirstChildElement(); c; c = c->NextSiblingElement())
      to->children.emplace_back();
    XmlElement *child = to->children.data();
    for (const tinyxml2::XMLElement *c = from->FirstChildElement(); c;
         c = c->NextSiblingElement())
      work.emplace_back(c, child++);
  }
  return tree;
}

} // namespace coll::ir
