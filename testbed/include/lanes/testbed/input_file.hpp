#pragma once
// Reading the files a user gives lanes (topologies, scenarios, suites): a
// bounded read with a plain message for what is not a file, and the checks
// of an XML document's shape that pugixml leaves to its caller.

#include <cstddef>
#include <string>
#include <vector>

namespace pugi {
class xml_document;
}

namespace lanes::testbed {

// Input files larger than this are refused (no lanes file comes near it).
inline constexpr size_t kMaxInputBytes = 16u << 20;

// The text of PATH. Throws InputError: a directory, a file that cannot be
// read, or one larger than kMaxInputBytes (also a device or pipe that never
// ends). WHAT names the file's role in messages ("topology file").
std::string read_input_file(const std::string& path, const std::string& what);

// "file:line: ..." for what pugixml accepts but XML forbids: more than one
// root element, an attribute given twice on one element. TEXT is what DOC
// was parsed from (for line numbers).
std::vector<std::string> xml_shape_problems(const pugi::xml_document& doc, const std::string& text,
                                            const std::string& file);

// The 1-based line of byte OFFSET in TEXT.
int line_at(const std::string& text, std::ptrdiff_t offset);

}  // namespace lanes::testbed
