# reccl_std_pch(target): the standard headers most of the project's units include, precompiled once
# for a C++ library with many units that each include much of it (docs/results/ci-time.md): a
# library of small units that include a few headers each loads the big header in more time than
# it parses theirs (reccl_testbed, reccl_netlink).
# Not in a sanitizer tree: there every unit is compiled from its own #includes, so one that leans
# on the precompiled headers fails to build; hence only for libraries a sanitizer tree builds too.
# Not for a library whose units carry their own -m flags (ccl/reduce's ISA kernels: the header
# would not match them), nor for one where GCC 12, reading the standard headers from the PCH,
# reports its std::string false positive (-Warray-bounds inside char_traits.h) that it keeps quiet
# for the same code parsed from the headers (reccl_api, reccl_verbs).
function(reccl_std_pch target)
  if(RECCL_SANITIZE)
    return()
  endif()
  target_precompile_headers(${target} PRIVATE
    <algorithm> <array> <atomic> <chrono> <condition_variable> <cstdint> <cstring> <deque> <functional>
    <map> <memory> <mutex> <optional> <set> <span> <string> <string_view> <thread> <vector>)
endfunction()
