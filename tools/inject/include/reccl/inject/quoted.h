// User text echoed in a one-line error: quoted, control characters escaped, long text cut, so a
// malformed plan or flag can never break the one-line rule.
#pragma once

#include <string>
#include <string_view>

namespace reccl::inject {

inline std::string quoteInput(std::string_view s, size_t maxLen = 64) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == maxLen) {
      out += "...";
      break;
    }
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

}  // namespace reccl::inject
