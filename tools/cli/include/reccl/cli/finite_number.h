// A CLI11 check that a number option is finite. CLI11's Range and PositiveNumber compare the
// value with their bounds, and NaN passes every comparison that is false; inf passes an open
// upper bound and overflows the integer the tools convert times into.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <string>

namespace reccl::cli {

inline const CLI::Validator FiniteNumber(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !std::isfinite(v)) return "Value " + text + " is not a finite number";
      return {};
    },
    "FINITE");

}  // namespace reccl::cli
