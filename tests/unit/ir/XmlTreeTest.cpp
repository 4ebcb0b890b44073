//===- XmlTreeTest.cpp - XML documents other than IR files -----------------===//

#include "coll/ir/XmlTree.h"

#include <gtest/gtest.h>

using coll::ir::parseXmlTree;
using coll::ir::XmlElement;

namespace {

std::string errorOf(llvm::StringRef text) {
  auto tree = parseXmlTree(text, "t.xml");
  EXPECT_FALSE(!!tree);
  return tree ? std::string() : llvm::toString(tree.takeError());
}

TEST(XmlTree, ElementsAttributesAndLines) {
  auto tree = parseXmlTree("<system version=\"1\">\n"
                           "  <!-- a comment -->\n"
                           "  <cpu arch=\"x86_64\" modelid=\"0x55\">\n"
                           "    <pci busid=\"0000:06:00.0\"/>text\n"
                           "    <pci busid=\"0000:07:00.0\" width=\" 16\"/>\n"
                           "  </cpu>\n"
                           "</system>\n",
                           "t.xml");
  ASSERT_TRUE(!!tree) << llvm::toString(tree.takeError());
  EXPECT_EQ(tree->name, "system");
  EXPECT_EQ(tree->line, 1);
  ASSERT_EQ(tree->children.size(), 1u);
  const XmlElement *cpu = tree->child("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->line, 3);
  EXPECT_STREQ(cpu->attribute("arch"), "x86_64");
  EXPECT_EQ(cpu->attribute("vendor"), nullptr);
  int model = 0;
  EXPECT_TRUE(cpu->intAttribute("modelid", model));
  EXPECT_EQ(model, 0x55);
  ASSERT_EQ(cpu->children.size(), 2u);
  EXPECT_STREQ(cpu->children[1].attribute("busid"), "0000:07:00.0");
  EXPECT_EQ(cpu->children[1].line, 5);
  int width = 0;
  EXPECT_TRUE(cpu->children[1].intAttribute("width", width));
  EXPECT_EQ(width, 16);
  // As tinyxml2 reads numbers: the leading one of "0000:06:00.0".
  EXPECT_TRUE(cpu->children[0].intAttribute("busid", width));
  EXPECT_EQ(width, 0);
  EXPECT_FALSE(cpu->intAttribute("missing", width));
  EXPECT_EQ(tree->child("gpu"), nullptr);
}

TEST(XmlTree, MalformedDocumentsSayWhere) {
  const std::string mismatched = errorOf("<system>\n  <cpu>\n</system>\n");
  EXPECT_EQ(mismatched.rfind("t.xml:2: error: malformed XML: ", 0), 0u) << mismatched;
  EXPECT_NE(errorOf("").find("t.xml:"), std::string::npos);
  EXPECT_NE(errorOf("<!-- only a comment -->").find("t.xml:1: error: no XML element"),
            std::string::npos);
}

TEST(XmlTree, DeepDocumentsDoNotRecurse) {
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += "<e>";
  for (int i = 0; i < 2000; ++i)
    text += "</e>";
  auto tree = parseXmlTree(text, "deep.xml");
  if (!tree) // tinyxml2 itself limits the depth; then it says so
    EXPECT_NE(llvm::toString(tree.takeError()).find("malformed XML"), std::string::npos);
  else
    EXPECT_EQ(tree->children.size(), 1u);
}

} // namespace
