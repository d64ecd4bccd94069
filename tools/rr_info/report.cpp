#include "report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <string>

namespace rr::info {

namespace {

// Columns on a terminal: UTF-8 characters, not bytes ("≥" is three bytes, one column).
size_t columns_of(const std::string& text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

void print_table(const Table& table, std::FILE* out) {
  if (!table.name.empty()) std::fprintf(out, "\n  %s\n", table.name.c_str());
  if (table.rows.empty()) {
    std::fprintf(out, "    (none)\n");
    return;
  }
  std::vector<size_t> width(table.columns.size());
  for (size_t c = 0; c < table.columns.size(); ++c) {
    width[c] = columns_of(table.columns[c]);
    for (const auto& row : table.rows) width[c] = std::max(width[c], columns_of(row[c]));
  }
  auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line = "   ";
    for (size_t c = 0; c < cells.size(); ++c) {
      line += " " + cells[c];
      if (c + 1 < cells.size()) line.append(width[c] - columns_of(cells[c]) + 1, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);  // an empty last cell leaves padding
    std::fprintf(out, "%s\n", line.c_str());
  };
  print_row(table.columns);
  for (const auto& row : table.rows) print_row(row);
}

}  // namespace

void print_text(const std::vector<Section>& sections, std::FILE* out) {
  for (size_t s = 0; s < sections.size(); ++s) {
    const Section& section = sections[s];
    std::fprintf(out, "%s%s\n", s ? "\n" : "", section.title.c_str());
    size_t key_width = 0;
    for (const auto& fact : section.facts) key_width = std::max(key_width, fact.first.size());
    for (const auto& [key, value] : section.facts) {
      std::fprintf(out, "  %-*s  %s\n", static_cast<int>(key_width), key.c_str(), value.c_str());
    }
    for (const Table& table : section.tables) print_table(table, out);
    for (const std::string& note : section.notes) std::fprintf(out, "  note: %s\n", note.c_str());
  }
}

// {"<section key>": {"<fact>": "...", "<table name>": [{"<column>": "..."}], "notes": [...]}}
// Every value is a string, as printed.
void print_json(const std::vector<Section>& sections, std::FILE* out) {
  using Json = nlohmann::ordered_json;
  Json doc = Json::object();
  for (const Section& section : sections) {
    Json& body = doc[section.key] = Json::object();
    for (const auto& [key, value] : section.facts) body[key] = value;
    for (const Table& table : section.tables) {
      Json& rows = body[table.name] = Json::array();
      for (const auto& cells : table.rows) {
        Json row = Json::object();
        for (size_t c = 0; c < table.columns.size(); ++c) row[table.columns[c]] = cells[c];
        rows.push_back(std::move(row));
      }
    }
    if (!section.notes.empty()) body["notes"] = section.notes;
  }
  // Device and library names are not ours to trust as UTF-8.
  const std::string text = doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  std::fputs(text.c_str(), out);
}

}  // namespace rr::info
