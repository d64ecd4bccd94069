#pragma once
// What rr-info prints, independent of how: sections of "key: value" facts
// and tables, written as aligned text for people or as JSON for scripts.

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace rr::info {

struct Table {
  std::string name;                           // JSON key, and a heading in text ("" for none)
  std::vector<std::string> columns;           // also the JSON keys of each row
  std::vector<std::vector<std::string>> rows;  // [row][column]
};

struct Section {
  std::string title;  // text heading
  std::string key;    // JSON key
  std::vector<std::pair<std::string, std::string>> facts;
  std::vector<Table> tables;
  std::vector<std::string> notes;  // sentences: what could not be read, and why
};

void print_text(const std::vector<Section>& sections, std::FILE* out);
void print_json(const std::vector<Section>& sections, std::FILE* out);

}  // namespace rr::info
