#include "units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace rrsim {

namespace {

// The number at the start of `text` and what follows it.
double leading_number(const std::string& flag, const std::string& text, std::string* rest) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v) || v < 0) {
    throw std::invalid_argument(flag + " " + text + ": expected a non-negative number");
  }
  *rest = std::string(end);
  return v;
}

double prefix(const std::string& flag, const std::string& text, char p) {
  switch (p) {
    case 'k': case 'K': return 1e3;
    case 'm': case 'M': return 1e6;
    case 'g': case 'G': return 1e9;
    case 't': case 'T': return 1e12;
  }
  throw std::invalid_argument(flag + " " + text + ": unknown prefix '" + std::string(1, p) + "'");
}

}  // namespace

size_t parse_bytes(const std::string& flag, const std::string& text) {
  std::string rest;
  double v = leading_number(flag, text, &rest);
  if (rest == "K" || rest == "k") v *= 1024.0;
  else if (rest == "M" || rest == "m") v *= 1024.0 * 1024.0;
  else if (rest == "G" || rest == "g") v *= 1024.0 * 1024.0 * 1024.0;
  else if (!rest.empty() && rest != "B") throw std::invalid_argument(flag + " " + text + ": expected bytes (64M, 1K, 4096)");
  return static_cast<size_t>(v);
}

size_t parse_count(const std::string& flag, const std::string& text) {
  std::string rest;
  const double v = leading_number(flag, text, &rest);
  if (!rest.empty() || v != std::floor(v) || v > 1e7) throw std::invalid_argument(flag + " " + text + ": expected a whole number");
  return static_cast<size_t>(v);
}

double parse_number(const std::string& flag, const std::string& text) {
  std::string rest;
  const double v = leading_number(flag, text, &rest);
  if (!rest.empty()) throw std::invalid_argument(flag + " " + text + ": expected a number");
  return v;
}

double parse_rate(const std::string& flag, const std::string& text) {
  std::string rest;
  double v = leading_number(flag, text, &rest);
  if (rest.size() >= 2 && rest.compare(rest.size() - 2, 2, "/s") == 0) rest.resize(rest.size() - 2);
  if (rest.empty()) return v;  // bytes per second
  double scale = 1;
  if (rest != "bit" && rest != "B" && rest != "b") {
    scale = prefix(flag, text, rest[0]);
    rest = rest.substr(1);
  }
  if (rest == "bit" || rest == "b") return v * scale / 8;
  if (rest == "B") return v * scale;
  throw std::invalid_argument(flag + " " + text + ": expected a rate (100Gbit, 12.5GB, bytes per second)");
}

double parse_seconds(const std::string& flag, const std::string& text) {
  std::string rest;
  const double v = leading_number(flag, text, &rest);
  if (rest.empty() || rest == "s") return v;
  if (rest == "ms") return v * 1e-3;
  if (rest == "us") return v * 1e-6;
  if (rest == "ns") return v * 1e-9;
  throw std::invalid_argument(flag + " " + text + ": expected seconds (5e-6, 5us, 2ms)");
}

std::string format_rate(double bytes_per_second) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.4g GB/s (%.4g Gbit/s)", bytes_per_second / 1e9, bytes_per_second * 8 / 1e9);
  return text;
}

std::string format_seconds(double seconds) {
  char text[32];
  if (seconds >= 1e-3) {
    std::snprintf(text, sizeof(text), "%.4g ms", seconds * 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%.4g us", seconds * 1e6);
  }
  return text;
}

}  // namespace rrsim
