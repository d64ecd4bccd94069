#include "report.hpp"

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

std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += static_cast<char>(c);
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      quoted += escaped;
    } else {
      quoted += static_cast<char>(c);
    }
  }
  return quoted + "\"";
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
  std::fprintf(out, "{");
  for (size_t s = 0; s < sections.size(); ++s) {
    const Section& section = sections[s];
    std::fprintf(out, "%s\n  %s: {", s ? "," : "", json_string(section.key).c_str());
    const char* separator = "";
    for (const auto& [key, value] : section.facts) {
      std::fprintf(out, "%s\n    %s: %s", separator, json_string(key).c_str(), json_string(value).c_str());
      separator = ",";
    }
    for (const Table& table : section.tables) {
      std::fprintf(out, "%s\n    %s: [", separator, json_string(table.name).c_str());
      for (size_t r = 0; r < table.rows.size(); ++r) {
        std::fprintf(out, "%s\n      {", r ? "," : "");
        for (size_t c = 0; c < table.columns.size(); ++c) {
          std::fprintf(out, "%s%s: %s", c ? ", " : "", json_string(table.columns[c]).c_str(),
                       json_string(table.rows[r][c]).c_str());
        }
        std::fprintf(out, "}");
      }
      std::fprintf(out, "%s]", table.rows.empty() ? "" : "\n    ");
      separator = ",";
    }
    if (!section.notes.empty()) {
      std::fprintf(out, "%s\n    \"notes\": [", separator);
      for (size_t n = 0; n < section.notes.size(); ++n) {
        std::fprintf(out, "%s%s", n ? ", " : "", json_string(section.notes[n]).c_str());
      }
      std::fprintf(out, "]");
    }
    std::fprintf(out, "\n  }");
  }
  std::fprintf(out, "\n}\n");
}

}  // namespace rr::info
