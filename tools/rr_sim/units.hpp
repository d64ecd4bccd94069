#pragma once
// rr-sim's command-line quantities: sizes (64M, 1K, 4096), rates (100Gbit,
// 12.5GB, or bytes per second), times (5e-6, 5us, 2ms), and their display.
// Each parser throws std::invalid_argument naming the flag and the text.

#include <cstddef>
#include <string>

namespace rrsim {

size_t parse_bytes(const std::string& flag, const std::string& text);
size_t parse_count(const std::string& flag, const std::string& text);
double parse_number(const std::string& flag, const std::string& text);  // a plain decimal number
double parse_rate(const std::string& flag, const std::string& text);  // bytes per second
double parse_seconds(const std::string& flag, const std::string& text);

std::string format_rate(double bytes_per_second);  // "12.5 GB/s (100 Gbit/s)"
std::string format_seconds(double seconds);        // "5 us"

}  // namespace rrsim
